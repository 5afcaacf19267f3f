package storage

import (
	"errors"
	"io/fs"
)

// ErrFileGone means the database file is no longer at its path: it was removed (or its
// directory was), or another file was put in its place. SQLite's connections stay on
// the file they opened, so a write would still commit, into a file that nobody will
// open again: after a restart it would be gone. Once reported it is reported from then
// on, even if a file comes back at the path: the open connections cannot move to it,
// and only a restart opens what is there now.
var ErrFileGone = errors.New("the database file is no longer at its path")

// FileKind names the kind of file mode says, for an error about a path that is not the
// regular file it should be.
func FileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// LinkToNothing says what a symbolic link to to is when to is not there: most often a
// disk not mounted, which "no such file" of the link's name, listed by ls, would hide.
func LinkToNothing(to string) string {
	return "a symbolic link to " + to + ", which does not exist (a disk not mounted?)"
}
