package storage

import (
	"errors"
)

// Errors returned by the methods of a Store, whichever engine runs.
var (
	// ErrNotFound means the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrClosed means the Store was closed while a write waited for its commit.
	ErrClosed = errors.New("database closed")
	// ErrWriteTimeout means a write (a delivery, a release, any change) was not
	// committed within the busy timeout of its call (a lock held by another process,
	// most likely) or could not be now (a full disk, a read-only database), and
	// nothing of it was stored.
	ErrWriteTimeout = errors.New("not committed within the busy timeout")
)

// Errors of opening a database's audit log to check it, without changing it.
var (
	// ErrAuditSchema means a database's schema predates the audit log's hash chain: its
	// rows have no hashes to check until serve (which migrates) has opened it.
	ErrAuditSchema = errors.New("the database's schema predates the audit log's hash chain")
	// ErrNotHookdedup means the database is one that hookdedup never set up.
	ErrNotHookdedup = errors.New("not a hookdedup database (it has no migrations table)")
)
