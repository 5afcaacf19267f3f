package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

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
	case absent(err):
		what = "removed"
	case err != nil:
		return fmt.Errorf("look for the database file: %w", err)
	case os.SameFile(fi, db.fileInfo):
		return nil
	default:
		what = "replaced by another file"
	}
	gone := fmt.Errorf("%w: %s was %s while open", storage.ErrFileGone, db.path, what)
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
// While the file is in place it notes the -wal and -shm beside it again (noteSideFiles):
// SQLite makes them anew if every connection closed meanwhile.
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
		switch err := db.checkFile(); {
		case errors.Is(err, storage.ErrFileGone):
			return
		case err == nil:
			if errors.Is(db.checkLog(), storage.ErrFileGone) {
				return
			}
			db.noteSideFiles()
		}
	}
}

// sideSuffixes are the files SQLite keeps beside a database in WAL mode: its log of
// committed pages, and that log's index.
var sideSuffixes = [...]string{"-wal", "-shm"}

// noteSideFiles notes which files are the -wal and -shm of the open database: those at
// its path beside it while the database file is the open one. Close sets them aside
// once the database file has left its path (setSideFilesAside).
func (db *DB) noteSideFiles() {
	for i, suffix := range sideSuffixes {
		db.sides[i] = nil
		if fi, err := os.Stat(db.sidePath(suffix)); err == nil {
			db.sides[i] = fi
		}
	}
}

// setSideFilesAside renames the -wal and -shm at the database's path to
// <name>.orphaned-<time>, if they are the ones the open database uses, once its file has
// left the path. They belong to that file, not to whatever is at the path now: the
// next open would replay that WAL, written for another file, into the one there and
// corrupt it. SQLite cannot fold the WAL into a file that has moved, so closing its
// connections leaves the WAL at the path; it is set aside before they close, or their
// last close could write into whatever has come to the path meanwhile. Files of the
// same names that another process has made since (another inode) are left alone.
func (db *DB) setSideFilesAside() {
	if fi, err := os.Stat(db.path); err == nil && os.SameFile(fi, db.fileInfo) {
		// In place (gone only in that its -wal was removed): the files beside it are
		// its own, and its last close copies the removed log into it.
		return
	}
	if !errors.Is(db.checkFile(), storage.ErrFileGone) {
		return
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	for i, suffix := range sideSuffixes {
		name := db.path + suffix
		fi, err := os.Stat(name)
		if err != nil {
			continue
		}
		if db.sides[i] == nil || !os.SameFile(fi, db.sides[i]) {
			continue
		}
		aside := name + ".orphaned-" + stamp
		if err := os.Rename(name, aside); err != nil {
			db.log.Error("could not set aside the "+suffix+" of the database file that left its path: "+
				"remove it before hookdedup opens the file now at the path, or that file will be corrupted",
				"path", name, "err", err)
			continue
		}
		db.log.Warn("set aside the "+suffix+" of the database file that left its path, so that it is not "+
			"applied to the file now there", "path", name, "aside", aside)
	}
}

// checkLog returns an error wrapping ErrFileGone, and marks the database gone as
// checkFile does, once the -wal or -shm that its connections use has been removed from
// beside it (a cleaner of stray files). They go on writing to the removed -wal, which a
// crash takes with it, commits the checkpointer has not copied yet included; and a
// process opening the database meanwhile makes a -wal or -shm of its own there, whose
// locks are not this process's: two writers at once corrupt the database. The first
// time, it logs one error saying so. It looks only when the file there is not the one
// noted (noteSideFiles): SQLite makes new ones itself once every connection has closed.
func (db *DB) checkLog() error {
	for i, suffix := range sideSuffixes {
		side := db.sidePath(suffix)
		if fi, err := os.Stat(side); err == nil && db.sides[i] != nil && os.SameFile(fi, db.sides[i]) {
			continue
		}
		if !holdsRemoved(side) {
			continue
		}
		gone := fmt.Errorf("%w: its %s was removed while open", storage.ErrFileGone, side)
		if db.gone.CompareAndSwap(nil, &gone) {
			db.log.Error("the database's "+suffix+" was removed while hookdedup had it open: what it commits from now on "+
				"would be lost at a crash, or corrupt the database beside another process's writes, so deliveries and "+
				"readiness answer 503 from now on; stop hookdedup (a clean stop copies its log into the database file) "+
				"and start it again", "path", side)
		}
		return *db.gone.Load()
	}
	return nil
}

// sidePath is the -wal or -shm (suffix) of the open database where SQLite keeps it:
// beside the file its path leads to, named as /proc names the files a process holds.
// noteSideFiles and checkLog look at the same one, or a database opened through a
// symbolic link would have none noted, and checkLog would read every descriptor of the
// process each second.
func (db *DB) sidePath(suffix string) string {
	abs, err := filepath.Abs(db.path)
	if err != nil {
		abs = db.path
	}
	return resolved(abs) + suffix
}

// holdsRemoved reports whether this process has a file open that was at name and has
// been removed since (Linux: /proc/self/fd; elsewhere it never knows).
func holdsRemoved(name string) bool {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && target == name+" (deleted)" {
			return true
		}
	}
	return false
}

// refuseNotAFile refuses a database path where something other than a file is: SQLite
// opens a named pipe for writing and fails at its first seek ("disk I/O error: illegal
// seek"), and a read-only open of one waits for a writer, past Ctrl-C.
//
// The same goes for the files SQLite keeps beside it, beside the file a link names: a
// rollback journal there is opened read-only to see whether it is hot, and that open of
// a named pipe waits for a writer as well; a named pipe as the log or its index fails
// with "disk I/O error: invalid argument".
func refuseNotAFile(path string) error {
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("it is %s, not a database file: name the database's file, or a path with nothing there", storage.FileKind(fi.Mode()))
	}
	// Absent, it is made as a file; another failure shows at the open.
	for _, f := range []struct{ suffix, what string }{
		{"-journal", "rollback journal"}, {"-wal", "write-ahead log"}, {"-shm", "log index"},
	} {
		log := resolved(path) + f.suffix
		if fi, err := os.Stat(log); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is %s, where SQLite keeps the database's %s: remove it, then run this again", log, storage.FileKind(fi.Mode()), f.what)
		}
	}
	return nil
}

// refuseSecondNames refuses the database file at path when it has other names (hard
// links). SQLite keeps a database's write-ahead log and its index beside the name it
// was opened by: a program that opened another name would read and write a log of its
// own beside this one's, and its commits and checkpoints would overwrite pages that
// the other log still holds newer versions of, corrupting the database. The serve
// lock, beside the name too, would not keep a second serve off either. A name that a
// killed restore left (dropAliasedKeptAside) is gone before this runs.
func refuseSecondNames(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent: it is made with one name; another failure shows at the open
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink <= 1 {
		return nil
	}
	return fmt.Errorf("the database file has %d names (hard links): SQLite keeps its log beside the name a program opens, "+
		"so programs opening different names would each write their own and corrupt it; remove every other name "+
		"(find / -xdev -samefile %s) and keep copies with hookdedup backup (a restore under way keeps the database "+
		"it replaces under a second name for a moment: then try again once it is done)", st.Nlink, path)
}
