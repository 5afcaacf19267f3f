package storage

import (
	"errors"
)

// ErrInUse means a process (serve, or another command) has the database open, so its
// file must not be replaced.
var ErrInUse = errors.New("database is in use by another process")
