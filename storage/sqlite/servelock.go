package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ServeLockSuffix names the file beside the database that a serve holds locked
// (Options.ServeLock) for as long as it has the database open.
const ServeLockSuffix = ".serve-lock"

// ErrServed is Open's refusal, with Options.ServeLock, of a database that another
// process serves.
var ErrServed = errors.New("another hookdedup serve is running on this database")

// servedError names the lock file and, when it holds one, the pid of the process that
// holds it.
type servedError struct {
	db, lock string
	pid      int
}

func (e servedError) Error() string {
	who := "another hookdedup serve"
	if e.pid > 0 {
		who += fmt.Sprintf(" (pid %d)", e.pid)
	}
	return fmt.Sprintf("%s is running on %s (it holds %s): two would both take deliveries, "+
		"dispatch and sweep the same file; stop it first, or give this one a database of its own",
		who, e.db, e.lock)
}

func (e servedError) Unwrap() error { return ErrServed }

// lockServe takes the serve lock of the database at path, which exists: an flock on
// path's ServeLockSuffix file (the file the path leads to, when it is a link, so that
// two links to one database share one lock), made 0600. An flock, not a POSIX lock:
// those are the process's and would go with the close of any descriptor of the file,
// and SQLite's own are on the database and its -shm. The lock file stays when the lock
// is released: removed, a serve starting meanwhile could lock the name's new file while
// another holds the old one. The returned file holds the lock until it is closed. On a
// file system without flock, or where the lock file cannot be made (a directory this
// user may not write, which SQLite then refuses, naming it), it returns nil and no
// error, and the database goes unlocked.
func lockServe(path string) (*os.File, error) {
	name := resolved(path) + ServeLockSuffix
	// Not through a link: the lock is in the database's directory, whose owner could
	// have put there a link to any file, which a serve run as root would otherwise open,
	// chmod, give to that owner and truncate.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, privateFile)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("make the serve lock %s: it is a symbolic link, which serve does not follow: remove it", name)
	}
	if err != nil {
		if syscall.Access(filepath.Dir(name), 2 /* W_OK */) != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("make the serve lock %s: %w", name, err)
	}
	// A hard link to another file is as dangerous, and a FIFO or device worse.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
		f.Close()
		if err == nil {
			err = errors.New("it is not a file of its own (a hard link to another file, or not a regular file): remove it")
		}
		return nil, fmt.Errorf("make the serve lock %s: %w", name, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		return nil, servedError{db: path, lock: name, pid: pid}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, nil
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// Whatever the umask, as the database (a file another user could write here could
	// not be locked against them).
	if err := f.Chmod(privateFile); err != nil {
		f.Close()
		return nil, fmt.Errorf("make the serve lock %s: %w", name, err)
	}
	// Through the descriptor, not the name, which could be swapped for a link meanwhile.
	uid, gid, ok, err := ownerOf(path)
	if err == nil && ok {
		err = f.Chown(uid, gid)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("make the serve lock %s: %w", name, err)
	}
	// Who holds it, for the refusal of the next: a stale pid is harmless, as only the
	// lock itself counts.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
