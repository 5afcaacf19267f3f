-- The business and correlation keys are found by the first 8 bytes of their hash, the
-- hash itself stored in its 32 bytes rather than as 64 hex digits. Each key moved into
-- these tables wrote an entry at a random place of an index that held the source or
-- rule, the 64 digits and the delivery: the entries filled about five times as many
-- pages as the 8 bytes and the row's id do, and most pages a move touched were written
-- to the write-ahead log, checkpointed and synced again, for an entry or two each. The
-- rows themselves are appended in the order they are stored, as are the entries of the
-- seen times that the sweeps and release read. A look-up matches the whole hash (and
-- the source or rule) from the row: two keys whose hashes begin alike are never taken
-- for each other, they only cost a row read.
--
-- A hash is stored as a BLOB of 32 bytes when it is the lower-case hex of one, which
-- every hash the receiver makes is (lower(hex(hash)) gives it back, exactly); any other
-- text is kept as TEXT, which no BLOB ever equals.

-- A delivery has one business key: the delivery's id is the row's.
CREATE TABLE business_keys_new (
    delivery INTEGER PRIMARY KEY,
    source   TEXT    NOT NULL,
    hash     BLOB    NOT NULL,  -- SHA-256 of the canonical JSON of the business key's fields
    seen_at  INTEGER NOT NULL
);
INSERT OR IGNORE INTO business_keys_new (delivery, source, hash, seen_at)
SELECT delivery, source,
    CASE WHEN octet_length(hash) = 64 AND lower(hex(unhex(hash))) = hash THEN unhex(hash) ELSE hash END,
    seen_at
FROM business_keys ORDER BY delivery;
DROP TABLE business_keys;
ALTER TABLE business_keys_new RENAME TO business_keys;
CREATE INDEX business_keys_hash ON business_keys (substr(hash, 1, 8));
CREATE INDEX business_keys_seen ON business_keys (seen_at);

-- A delivery has one correlation key a rule of its source: rows are numbered as stored.
CREATE TABLE correlation_keys_new (
    rule     TEXT    NOT NULL,
    hash     BLOB    NOT NULL,  -- SHA-256 of the canonical JSON of booking, amount and currency
    source   TEXT    NOT NULL,
    delivery INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL
);
INSERT INTO correlation_keys_new (rule, hash, source, delivery, seen_at)
SELECT rule,
    CASE WHEN octet_length(hash) = 64 AND lower(hex(unhex(hash))) = hash THEN unhex(hash) ELSE hash END,
    source, delivery, seen_at
FROM correlation_keys ORDER BY seen_at, delivery;
DROP TABLE correlation_keys;
ALTER TABLE correlation_keys_new RENAME TO correlation_keys;
CREATE INDEX correlation_keys_hash ON correlation_keys (substr(hash, 1, 8));
CREATE INDEX correlation_keys_seen ON correlation_keys (seen_at);

-- The keys not yet moved keep their rowids: the writer numbers them (forensics.go).
CREATE TABLE forensic_keys_pending_new (
    rule     TEXT    NOT NULL,  -- the correlation rule; '' for a business key
    hash     BLOB    NOT NULL,
    source   TEXT    NOT NULL,
    delivery INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL
);
INSERT INTO forensic_keys_pending_new (rowid, rule, hash, source, delivery, seen_at)
SELECT rowid, rule,
    CASE WHEN octet_length(hash) = 64 AND lower(hex(unhex(hash))) = hash THEN unhex(hash) ELSE hash END,
    source, delivery, seen_at
FROM forensic_keys_pending ORDER BY rowid;
DROP TABLE forensic_keys_pending;
ALTER TABLE forensic_keys_pending_new RENAME TO forensic_keys_pending;
