-- The business and correlation keys are found by a 64-bit hash of their hash text,
-- seeded by their source or rule (the text is of the key's fields alone, the same in
-- every source or rule that reads them), rather than by the text itself: an accepted
-- delivery with refund forensics on stores a row in each table in the claim's
-- transaction, and the primary keys' entries, the source or rule and 64 hex digits
-- each, at random places of the index, cost most of that: about twice the entries'
-- size a page, and as much again in the write-ahead log. The look-ups match the text
-- too, from the row, so two keys of one 64-bit hash are never taken for each other.
-- Nothing needs the rows unique: intake stores each key of a delivery once.
ALTER TABLE business_keys DROP CONSTRAINT business_keys_pkey;
CREATE INDEX business_keys_hash ON business_keys (hashtextextended(hash, hashtext(source)), delivery);
ALTER TABLE correlation_keys DROP CONSTRAINT correlation_keys_pkey;
CREATE INDEX correlation_keys_hash ON correlation_keys (hashtextextended(hash, hashtext(rule)), delivery);
-- Without a primary key a table has no replica identity, and PostgreSQL refuses every
-- DELETE of it (a release, the sweep) once an operator publishes the tables for
-- logical replication (a move to another server, a managed blue/green switch). The
-- whole row is the identity: it is written to the log only when the log is logical,
-- and a subscriber (PostgreSQL 16 on) finds it through the index of seen times.
ALTER TABLE business_keys REPLICA IDENTITY FULL;
ALTER TABLE correlation_keys REPLICA IDENTITY FULL;
