-- Replicas from this version on take their advisory locks (the audit log's, the users',
-- intake's, each sweep's and roll-up's) in a space of their schema's own (locks.go), so
-- that two installations in two schemas of one database do not wait on each other's.
-- A replica of an earlier version takes the database's: beside one of this version it
-- would write the audit log, sweep and roll up at the same moments, the totals of a
-- roll-up counted twice. This migration changes no table; it is here so that an
-- earlier replica still running sees a schema newer than it knows and stops.
SELECT 1;
