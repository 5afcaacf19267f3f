-- Claims and deliveries, the intake's two tables, with the columns of the SQLite
-- engine's so that a database copies across column by column. Times are unix
-- milliseconds, as there: every "now" is the engine's clock (DB.Now, the same on every
-- replica's writes), never the server's.

-- Delivery ids come from a sequence, never reused, taken by the engine before its
-- inserts: a duplicate names the delivery that won its claim in the same batch.
CREATE SEQUENCE delivery_ids AS bigint;

CREATE TABLE deliveries (
    id             bigint  PRIMARY KEY DEFAULT nextval('delivery_ids'),
    source         text    NOT NULL,
    received_at    bigint  NOT NULL,
    outcome        text    NOT NULL,             -- accepted | duplicate | rejected
    status         integer NOT NULL,             -- the HTTP status answered
    error          text    NOT NULL DEFAULT '',  -- why it was rejected
    key            text    NOT NULL DEFAULT '',
    key_method     text    NOT NULL DEFAULT '',  -- event_id | derived
    key_from       text    NOT NULL DEFAULT '',
    key_canonical  text    NOT NULL DEFAULT '',
    payload_hash   text    NOT NULL DEFAULT '',
    mismatch       boolean NOT NULL DEFAULT false,
    money_mismatch boolean NOT NULL DEFAULT false,
    first_delivery bigint  NOT NULL DEFAULT 0,   -- for duplicates: the delivery that won the claim
    property       text    NOT NULL DEFAULT '',
    booking        text    NOT NULL DEFAULT '',
    event_status   text    NOT NULL DEFAULT '',
    amount         text    NOT NULL DEFAULT '',  -- as sent, in major units
    currency       text    NOT NULL DEFAULT '',
    remote_addr    text    NOT NULL DEFAULT '',
    content_type   text    NOT NULL DEFAULT '',
    headers        text    NOT NULL DEFAULT '{}',
    body           bytea,
    body_from      bigint  NOT NULL DEFAULT 0,   -- a duplicate's identical body, kept by reference
    batch          bigint  NOT NULL DEFAULT 0,
    batch_index    integer NOT NULL DEFAULT 0
);
ALTER SEQUENCE delivery_ids OWNED BY deliveries.id;

CREATE INDEX deliveries_key ON deliveries (source, key);
CREATE INDEX deliveries_source_id ON deliveries (source, id);
CREATE INDEX deliveries_outcome_id ON deliveries (outcome, id) WHERE outcome <> 'accepted';
CREATE INDEX deliveries_rejected_at ON deliveries (received_at) WHERE outcome = 'rejected';
CREATE INDEX deliveries_mismatch ON deliveries (id) WHERE mismatch;
CREATE INDEX deliveries_money_mismatch_at ON deliveries (received_at) WHERE money_mismatch;
CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking <> '';
CREATE INDEX deliveries_batch ON deliveries (batch, batch_index) WHERE batch <> 0;

-- One row per (source, key): the claim is one INSERT … ON CONFLICT … DO UPDATE … WHERE
-- the old row expired or was released, so exactly one of any number of concurrent
-- deliveries wins, on whichever replica it arrives.
CREATE TABLE claims (
    id              bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source          text    NOT NULL,
    key             text    NOT NULL,
    state           text    NOT NULL,            -- processing | processed | failed | released
    first_delivery  bigint  NOT NULL DEFAULT 0,  -- the delivery that won the claim
    payload_hash    text    NOT NULL,
    claimed_at      bigint  NOT NULL,
    expires_at      bigint  NOT NULL,
    updated_at      bigint  NOT NULL,            -- when the key entered its state
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at bigint,                      -- the dispatcher's queue, leased with SKIP LOCKED
    last_error      text    NOT NULL DEFAULT '',
    UNIQUE (source, key)
);

CREATE INDEX claims_due ON claims (next_attempt_at) WHERE state = 'processing';
CREATE INDEX claims_expiring ON claims (expires_at) WHERE state IN ('processed', 'released');
CREATE INDEX claims_released ON claims (id) WHERE state = 'released';
CREATE INDEX claims_stuck ON claims (source, state, updated_at) WHERE state IN ('processing', 'failed');
CREATE INDEX claims_unsettled ON claims (updated_at) WHERE state IN ('processing', 'failed');
CREATE INDEX claims_unsettled_id ON claims (state, id) WHERE state IN ('processing', 'failed');
