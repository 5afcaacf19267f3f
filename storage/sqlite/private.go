package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hookdedup/hookdedup/storage"
)

// The database holds webhook secrets, session keys and password hashes: its files are
// for the user that runs hookdedup alone.
const (
	privateFile fs.FileMode = 0o600
	privateDir  fs.FileMode = 0o700
)

// MakeDirs creates dir and those of its parents that are missing, each 0700 whatever the
// umask. Directories that exist already are left as they are: their mode is their
// owner's choice.
func MakeDirs(dir string) error {
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MakeDirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, privateDir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
				return nil // made meanwhile, by someone else: theirs
			} else if serr == nil {
				return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
			}
			// A link to nothing (to a disk that is not mounted): taken for a directory,
			// the first file written there would fail naming that file.
			if to, lerr := os.Readlink(dir); lerr == nil {
				return fmt.Errorf("%s is %s", dir, storage.LinkToNothing(to))
			}
		}
		return err
	}
	// Mkdir's mode passes through the umask, which may take bits away (0277 would leave
	// a directory its owner cannot write); Chmod does not.
	if err := os.Chmod(dir, privateDir); err != nil {
		return err
	}
	// Made as root (a backup with sudo into the directory the backup timer uses, not
	// made yet), it is the directory's it is in, as the service's user's.
	return ownLike(dir, filepath.Dir(dir))
}

// ownLike gives the file or directory at path, when this process runs as root, the
// owner and group of the one at like. A command run with sudo on the service's files
// would otherwise leave there a file or directory of root's, 0600 or 0700, that the
// service's user could neither open nor write in, and serve or the backup timer would
// fail from then on. SQLite gives the -wal and -shm it makes as root the database's
// owner for the same reason.
//
// A link at path is not followed: path is in a directory that user may write, who
// could have put there a link to a file of root's, which would then become theirs.
func ownLike(path, like string) error {
	uid, gid, ok, err := ownerOf(like)
	if !ok || err != nil {
		return err
	}
	return os.Lchown(path, uid, gid)
}

// ownerOf returns the owner and group of the file at like, with ok set, when this
// process runs as root; ok is false otherwise, and where the system has no owners.
func ownerOf(like string) (uid, gid int, ok bool, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, false, nil
	}
	fi, err := os.Stat(like)
	if err != nil {
		return 0, 0, false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false, nil
	}
	return int(st.Uid), int(st.Gid), true, nil
}

// createPrivate creates the database file at path, and its directory, before SQLite
// opens it: SQLite creates a new file, and later its -wal and -shm, with the mode the
// umask leaves (0644 under the usual 022), and gives -wal and -shm the main file's mode.
// Creating the main file 0600 here makes all three private. An existing file is left
// alone.
func createPrivate(path string) error {
	if err := MakeDirs(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, privateFile)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(privateFile); err != nil { // as in MakeDirs: whatever the umask
		f.Close()
		return err
	}
	// Made as root (sudo hookdedup user add, before the service's first start), the
	// file is its directory's owner's, as the service's user's; SQLite then gives its
	// -wal and -shm the same owner. Through the descriptor, as the serve lock is given
	// its owner: the file made here, whatever is put at path meanwhile.
	uid, gid, ok, err := ownerOf(filepath.Dir(path))
	if err == nil && ok {
		err = f.Chown(uid, gid)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// missing reports whether nothing is at path: no file, no directory on the way to it, or
// a symbolic link to nothing.
func missing(path string) bool {
	_, err := os.Stat(path)
	return absent(err)
}

// absent reports whether err, from a look at a path, says nothing is there.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// warnShared logs one warning when the database's files can be read or written by users
// other than their owner. It does not change their mode: permissions on a file that
// exists are its owner's decision (a group that a backup agent reads through, say), and
// a service that quietly undoes them breaks that at its next restart. The warning says
// how to make them private.
func warnShared(log *slog.Logger, path string) {
	var shared []string
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		shared = append(shared, fmt.Sprintf("%s (%#o)", name, uint32(fi.Mode().Perm())))
	}
	if len(shared) == 0 {
		return
	}
	log.Warn("the database can be read by other users of this machine, and it holds webhook secrets, "+
		"session keys and password hashes: make it private with chmod 600 (SQLite gives its -wal and -shm files the database's mode)",
		"files", strings.Join(shared, ", "))
}

// WarnShared logs, as every open of the database at path does, one warning when its
// files can be read or written by users other than their owner: for the commands that
// read the file without opening it as a DB (backup).
func WarnShared(log *slog.Logger, path string) {
	warnShared(log.With("component", "storage"), path)
}

// refuseStrayLog refuses to create a database at path beside a -wal or -journal that
// holds transactions (heldLog): its database was moved or removed without it, or a
// crash cut a restore short between its renames. SQLite deletes the -wal of a database
// file that holds no page at its first read, and with it the commits it alone holds,
// which an empty database made there would then accept again as new.
func refuseStrayLog(path string) error {
	if !missing(path) {
		return nil
	}
	log, err := heldLog(resolved(path))
	if err != nil || log == "" {
		return err
	}
	return strayLogError(log, ", then try again")
}

// fileURI is the SQLite URI of the database file at path, for a connection's DSN (its
// parameters follow after a "?"). A relative path goes as ./path: "file::memory:" is
// SQLite's in-memory database, not the file named :memory: here, which a command would
// have said it stored in when nothing was kept. A path that begins with // (DIR/name
// with DIR set to /) goes with one: file://x/… names x as the URI's authority, which
// SQLite refuses.
func fileURI(path string) string {
	if !filepath.IsAbs(path) {
		path = "./" + path
	} else if strings.HasPrefix(path, "//") {
		path = "/" + strings.TrimLeft(path, "/")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath()
}
