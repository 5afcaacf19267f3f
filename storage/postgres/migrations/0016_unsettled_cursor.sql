-- A stuck listing pages oldest first by (updated_at, id): with the id in the index a
-- page's scan starts exactly after the cursor, in order, however many keys share its
-- millisecond. On updated_at alone the keys of one millisecond come in the heap's
-- order, to be sorted, and a page after a batch's worth of them read it all again.
-- SQLite's index holds the rowid after its columns already.
--
-- The new index is built before the old one is dropped: DROP INDEX locks claims against
-- reads too, and held through the build (a migration is one transaction) it stopped
-- every replica still serving from looking up a single key until the build ended. The
-- build itself only holds off writes.
CREATE INDEX claims_unsettled_cursor ON claims (updated_at, id) WHERE state IN ('processing', 'failed');
DROP INDEX claims_unsettled;
ALTER INDEX claims_unsettled_cursor RENAME TO claims_unsettled;
