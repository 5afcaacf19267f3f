-- The business keys (rule '') and correlation keys of recent accepted deliveries, kept
-- apart from business_keys and correlation_keys until there are enough of them to move
-- at once. A key lands on a leaf of its table's hash-ordered index that no recent key
-- touched: stored one batch of intake at a time, each key cost a page of the
-- write-ahead log, and forensics took a third of intake's throughput. Appended here, in
-- delivery order and without an index, a batch's keys share a page or two; the writer
-- keeps an indexed copy of them in memory for its lookups (forensics.go), and moves them
-- into the indexed tables some thousands at a time, in the order of those indexes.
CREATE TABLE forensic_keys_pending (
    rule     TEXT    NOT NULL,  -- the correlation rule; '' for a business key
    hash     TEXT    NOT NULL,
    source   TEXT    NOT NULL,
    delivery INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL
);
