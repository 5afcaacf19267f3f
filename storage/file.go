package storage

import (
	"errors"
)

// ErrFileGone means the database file is no longer at its path: it was removed (or its
// directory was), or another file was put in its place. SQLite's connections stay on
// the file they opened, so a write would still commit, into a file that nobody will
// open again: after a restart it would be gone. Once reported it is reported from then
// on, even if a file comes back at the path: the open connections cannot move to it,
// and only a restart opens what is there now.
var ErrFileGone = errors.New("the database file is no longer at its path")
