-- Forensics: the doubles that transport deduplication cannot see.

-- A duplicate whose amount, currency or status differs from its first delivery's: a
-- mismatch that moves money, counted and shown apart from a mismatch in other fields.
ALTER TABLE deliveries ADD COLUMN money_mismatch INTEGER NOT NULL DEFAULT 0;

-- One row per flag on an accepted delivery: a suspected duplicate within its source
-- (business_key), a suspected double across sources (correlation), or a late duplicate
-- (its key was seen before, in a window that has passed). A delivery may carry several.
CREATE TABLE suspects (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL,            -- business_key | correlation | late_duplicate
    delivery     INTEGER NOT NULL,            -- the delivery flagged
    other        INTEGER NOT NULL DEFAULT 0,  -- the delivery it doubles; 0 when unknown (a late duplicate whose first delivery is gone)
    source       TEXT    NOT NULL,
    other_source TEXT    NOT NULL DEFAULT '',
    rule         TEXT    NOT NULL DEFAULT '', -- the correlation rule's name
    property     TEXT    NOT NULL DEFAULT '',
    booking      TEXT    NOT NULL DEFAULT '',
    amount       TEXT    NOT NULL DEFAULT '', -- major units, as deliveries.amount
    currency     TEXT    NOT NULL DEFAULT '',
    first_seen   INTEGER NOT NULL DEFAULT 0,  -- late duplicates: when the key was first seen
    flagged_at   INTEGER NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'open', -- open | confirmed | dismissed
    reviewed_by  TEXT    NOT NULL DEFAULT '',
    reviewed_at  INTEGER NOT NULL DEFAULT 0,
    reason       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX suspects_delivery ON suspects (delivery);
CREATE INDEX suspects_other ON suspects (other) WHERE other != 0;
CREATE INDEX suspects_flagged ON suspects (flagged_at);
CREATE INDEX suspects_open ON suspects (flagged_at) WHERE state = 'open';

-- The business keys of accepted deliveries, looked up by hash within a source's window.
CREATE TABLE business_keys (
    source   TEXT    NOT NULL,
    hash     TEXT    NOT NULL,  -- SHA-256 of the canonical JSON of the business key's fields
    delivery INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL,
    PRIMARY KEY (source, hash, delivery)
) WITHOUT ROWID;
CREATE INDEX business_keys_seen ON business_keys (seen_at);

-- The booking, amount and currency of accepted deliveries that a correlation rule reads,
-- looked up across the rule's sources within its window.
CREATE TABLE correlation_keys (
    rule     TEXT    NOT NULL,
    hash     TEXT    NOT NULL,  -- SHA-256 of the canonical JSON of booking, amount and currency
    source   TEXT    NOT NULL,
    delivery INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL,
    PRIMARY KEY (rule, hash, delivery)
) WITHOUT ROWID;
CREATE INDEX correlation_keys_seen ON correlation_keys (seen_at);

-- A compact trace of each expired claim, kept for the remember period: a delivery whose
-- key matches one is accepted (its window has passed) but flagged a late duplicate.
CREATE TABLE key_traces (
    source         TEXT    NOT NULL,
    key_hash       BLOB    NOT NULL,  -- SHA-256 of the key
    first_seen     INTEGER NOT NULL,  -- when the key was first claimed
    first_delivery INTEGER NOT NULL DEFAULT 0,
    expired_at     INTEGER NOT NULL,
    PRIMARY KEY (source, key_hash)
) WITHOUT ROWID;
CREATE INDEX key_traces_expired ON key_traces (expired_at);
