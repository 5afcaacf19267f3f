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
	// most likely), and nothing of it was stored: retry later.
	ErrWriteTimeout = errors.New("not committed within the busy timeout")
	// ErrCannotStore means the database refused a write it may take later (a full
	// disk, a read-only database or standby), and nothing of it was stored. It is an
	// ErrWriteTimeout to every caller that answers "retry later" (errors.Is), and says
	// what it is in logs rather than blaming a lock.
	ErrCannotStore error = cannotStore{}
)

type cannotStore struct{}

func (cannotStore) Error() string        { return "the database cannot store changes now" }
func (cannotStore) Is(target error) bool { return target == ErrWriteTimeout }

// Errors of opening a database's audit log to check it, without changing it.
var (
	// ErrAuditSchema means a database's schema predates the audit log's hash chain: its
	// rows have no hashes to check until serve (which migrates) has opened it.
	ErrAuditSchema = errors.New("the database's schema predates the audit log's hash chain")
	// ErrNotHookdedup means the database is one that hookdedup never set up.
	ErrNotHookdedup = errors.New("not a hookdedup database (it has no migrations table)")
)
