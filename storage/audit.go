package storage

import (
	"time"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID            int64
	At            time.Time
	Actor, Action string
	Source, Key   string
	Reason        string
	PreviousState string
	// Hash is the row's link in the audit chain (auditchain.go): 64 lowercase hex
	// digits. The log sets it; it is ignored when appending.
	Hash string
}
