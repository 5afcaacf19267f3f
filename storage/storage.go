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
	// most likely), and nothing of it was stored.
	ErrWriteTimeout = errors.New("not committed within the busy timeout")
)
