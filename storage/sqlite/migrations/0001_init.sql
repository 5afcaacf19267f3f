-- Claims: one row per (source, key). The UNIQUE constraint is what makes a claim atomic:
-- of any number of concurrent inserts of one key exactly one can win.
CREATE TABLE claims (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    state           TEXT    NOT NULL,            -- processing | processed | failed | released
    first_delivery  INTEGER NOT NULL DEFAULT 0,  -- the delivery that won the claim
    payload_hash    TEXT    NOT NULL,
    claimed_at      INTEGER NOT NULL,            -- unix milliseconds, as every time column
    expires_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,            -- when the key entered its state
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    UNIQUE (source, key)
);
-- The expiry sweep walks this index in bounded batches.
CREATE INDEX claims_expires_at ON claims (expires_at);
-- The dispatcher's queue: only keys still to be handed downstream are in it.
CREATE INDEX claims_due ON claims (next_attempt_at) WHERE state = 'processing';
-- Stuck keys (failed, or processing too long) are found without scanning every claim.
CREATE INDEX claims_unsettled ON claims (updated_at) WHERE state IN ('processing', 'failed');

CREATE TABLE deliveries (
    id             INTEGER PRIMARY KEY,
    source         TEXT    NOT NULL,
    received_at    INTEGER NOT NULL,
    outcome        TEXT    NOT NULL,             -- accepted | duplicate | rejected
    status         INTEGER NOT NULL,             -- the HTTP status answered
    error          TEXT    NOT NULL DEFAULT '',  -- why it was rejected
    key            TEXT    NOT NULL DEFAULT '',
    key_method     TEXT    NOT NULL DEFAULT '',  -- event_id | derived
    key_from       TEXT    NOT NULL DEFAULT '',  -- the pointer or header the event id came from
    key_canonical  TEXT    NOT NULL DEFAULT '',  -- canonical JSON the derived key hashes
    payload_hash   TEXT    NOT NULL DEFAULT '',
    mismatch       INTEGER NOT NULL DEFAULT 0,
    first_delivery INTEGER NOT NULL DEFAULT 0,   -- for duplicates: the delivery that won the claim
    property       TEXT    NOT NULL DEFAULT '',  -- business fields, for the console's filters
    booking        TEXT    NOT NULL DEFAULT '',
    event_status   TEXT    NOT NULL DEFAULT '',
    amount         TEXT    NOT NULL DEFAULT '',  -- the money a duplicate would have moved, as sent
    remote_addr    TEXT    NOT NULL DEFAULT '',
    content_type   TEXT    NOT NULL DEFAULT '',
    headers        TEXT    NOT NULL DEFAULT '{}',
    body           BLOB
);
-- Every delivery of one key, side by side.
CREATE INDEX deliveries_key ON deliveries (source, key);
-- The retention sweep; receipt times grow with ids, so appends stay at the right edge.
CREATE INDEX deliveries_received_at ON deliveries (received_at);

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    role          TEXT    NOT NULL,
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Every hand-off attempt downstream.
CREATE TABLE attempts (
    id         INTEGER PRIMARY KEY,
    source     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    delivery   INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status     INTEGER NOT NULL DEFAULT 0,   -- HTTP status, 0 when none came back
    error      TEXT    NOT NULL DEFAULT '',
    response   TEXT    NOT NULL DEFAULT ''   -- a bounded excerpt of the answer
);
CREATE INDEX attempts_key ON attempts (source, key);

-- Who changed what, and why.
CREATE TABLE audit_log (
    id             INTEGER PRIMARY KEY,
    at             INTEGER NOT NULL,
    actor          TEXT    NOT NULL,
    action         TEXT    NOT NULL,
    source         TEXT    NOT NULL DEFAULT '',
    key            TEXT    NOT NULL DEFAULT '',
    reason         TEXT    NOT NULL DEFAULT '',
    previous_state TEXT    NOT NULL DEFAULT ''
);

-- API bearer tokens, stored as SHA-256 hashes; the token itself is shown once.
CREATE TABLE tokens (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
