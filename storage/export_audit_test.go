package storage

// AuditCheckBatch is how many rows one AuditChain call checks at most.
const AuditCheckBatch = auditCheckBatch
