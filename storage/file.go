package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// ErrFileGone means the database file is no longer at its path: it was removed (or its
// directory was), or another file was put in its place. SQLite's connections stay on
// the file they opened, so a write would still commit, into a file that nobody will
// open again: after a restart it would be gone. Once reported it is reported from then
// on, even if a file comes back at the path: the open connections cannot move to it,
// and only a restart opens what is there now.
var ErrFileGone = errors.New("the database file is no longer at its path")

// fileID identifies a file on this machine: its device and inode.
type fileID struct{ dev, ino uint64 }

func identify(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, err
	}
	return idOf(fi)
}

func idOf(fi os.FileInfo) (fileID, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("%s: no device and inode to identify it by", fi.Name())
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// fileCheckEvery is how often the database file is looked for while nothing else looks:
// the intake writer checks after each commit and Ping on each call, so this only makes
// the log say what happened when no delivery or probe comes.
const fileCheckEvery = time.Second

// checkFile returns an error wrapping ErrFileGone once the file at db.path is not the
// database file that db has open. The first time, it logs one error saying so. Another
// failure to look (a directory made unreadable) is returned as it is, and not kept: it
// does not say that the file left.
func (db *DB) checkFile() error {
	if err := db.gone.Load(); err != nil {
		return *err
	}
	fi, err := os.Stat(db.path)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		what = "removed"
	case err != nil:
		return fmt.Errorf("look for the database file: %w", err)
	default:
		id, err := idOf(fi)
		if err != nil {
			return fmt.Errorf("look for the database file: %w", err)
		}
		if id == db.fileID {
			return nil
		}
		what = "replaced by another file"
	}
	gone := fmt.Errorf("%w: %s was %s while open", ErrFileGone, db.path, what)
	if db.gone.CompareAndSwap(nil, &gone) {
		db.log.Error("the database file was "+what+" while hookdedup had it open: deliveries and readiness "+
			"answer 503 from now on, and hookdedup must be restarted (with the file back in place) to store again",
			"path", db.path)
	}
	return *db.gone.Load()
}

// fileGone returns checkFile's ErrFileGone once it has been found, without looking.
func (db *DB) fileGone() error {
	if err := db.gone.Load(); err != nil {
		return *err
	}
	return nil
}

// watchFile runs checkFile every fileCheckEvery until Close or until the file is gone.
func (db *DB) watchFile() {
	defer close(db.watcherDone)
	t := time.NewTicker(fileCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if errors.Is(db.checkFile(), ErrFileGone) {
			return
		}
	}
}
