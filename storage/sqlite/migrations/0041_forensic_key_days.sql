-- The business and correlation keys are found by the day they were seen first, then by
-- the first 8 bytes of their hash. Indexed by the hash alone, every key moved into
-- these tables landed on a leaf anywhere in an index of the whole window: with a
-- million keys in it, a move of a few thousand wrote about as many pages as keys, each
-- to the write-ahead log and then into the file again. Now a key lands among the day's
-- keys, a few hundred leaves that the moves of the day share, however long the window.
-- A look-up seeks twice in each day the table holds keys of, from its window's first on
-- (once to find the day, once for the key), where it sought once: intake looks up only
-- the keys its filter may hold.
-- The expression is the queries' own (sqlKeyDay in forensics.go): SQLite uses an index
-- on an expression only for that expression, written the same.
DROP INDEX business_keys_hash;
CREATE INDEX business_keys_hash ON business_keys (seen_at / 86400000, substr(hash, 1, 8));
DROP INDEX correlation_keys_hash;
CREATE INDEX correlation_keys_hash ON correlation_keys (seen_at / 86400000, substr(hash, 1, 8));
