-- The audit log becomes a hash chain: each row's hash covers the row before it and the
-- row's own content (storage/auditchain.go). The rows already here are chained, in id
-- order from the genesis, by the Go step that runs with this migration in its
-- transaction.
ALTER TABLE audit_log ADD COLUMN hash TEXT NOT NULL DEFAULT '';
