package sqlite

// AuditCheckBatch is how many rows one AuditChain call checks at most.
const AuditCheckBatch = auditCheckBatch

// ForgetAuditMark makes the next AuditChain start from the genesis, as after a restart.
func (db *DB) ForgetAuditMark() { db.auditMark.Forget() }
