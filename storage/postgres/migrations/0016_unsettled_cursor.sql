-- A stuck listing pages oldest first by (updated_at, id): with the id in the index a
-- page's scan starts exactly after the cursor, in order, however many keys share its
-- millisecond. On updated_at alone the keys of one millisecond come in the heap's
-- order, to be sorted, and a page after a batch's worth of them read it all again.
-- SQLite's index holds the rowid after its columns already.
DROP INDEX claims_unsettled;
CREATE INDEX claims_unsettled ON claims (updated_at, id) WHERE state IN ('processing', 'failed');
