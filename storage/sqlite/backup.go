package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/hookdedup/hookdedup/storage"
)

// BackupInfo describes a copy of the database.
type BackupInfo struct {
	Path       string
	Bytes      int64
	Deliveries int64
	Claims     int64
	// ID is the database's identity (BackupID): "" for a database made before
	// identities, until it is next opened.
	ID string
	// Newer names the migrations the copy records that this build does not know: a
	// newer version migrated the database, and only a version that has them can
	// restore the copy (restore refuses it otherwise). Empty for every other copy.
	Newer []string
}

// Backup writes a consistent copy of the live database to path, through SQLite's online
// backup API: the copy is one snapshot (one read transaction), taken while writers carry
// on. It is written to a temporary file beside path, checked (PRAGMA integrity_check),
// synced and only then renamed over path, so path never holds a partial copy. Returns an
// error if path is the database itself or one of the files SQLite keeps beside it, or
// anything but an earlier copy (a copy of this database, no later than it, that no
// process has open), an empty file or a SQLite file without a table.
func (db *DB) Backup(ctx context.Context, path string) (BackupInfo, error) {
	return backup(ctx, db.read, db.path, path)
}

// BackupFile writes a copy of the database file at src to path, as Backup does, without
// opening it as a DB: it neither migrates nor writes src. A backup taken before an
// upgrade, by the upgrade's binary while the old serve still runs, must be of the schema
// that serve knows, and must leave that serve's file as it is. Returns an error wrapping
// storage.ErrNoDatabase when there is no file at src.
func BackupFile(ctx context.Context, src, path string) (BackupInfo, error) {
	if missing(src) {
		return BackupInfo{}, fmt.Errorf("backup %s: %w", src, storage.ErrNoDatabase)
	}
	if err := refuseNotAFile(src); err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w", src, err)
	}
	// Read under a second name, the file is read without the log serve keeps beside the
	// first: the copy would lack every commit still in it.
	if err := refuseSecondNames(src); err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w", src, err)
	}
	read := openReadOnly(src, 5*time.Second)
	defer read.Close()
	return backup(ctx, read, src, path)
}

// backup copies the database at dbPath, read through read, to path.
func backup(ctx context.Context, read *sql.DB, dbPath, path string) (BackupInfo, error) {
	// A symbolic link (latest.db to the newest on a mounted disk) is written through, as
	// cp writes: renamed onto, it would be replaced by the copy, which would then stay
	// beside the link rather than go where it leads. A link to nothing is refused
	// (replaceable).
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	fail := func(err error) (BackupInfo, error) {
		if interrupted(ctx, err) {
			// The copy is not checked because it was cut short, not because it failed
			// its check, which would read as a damaged database.
			return BackupInfo{}, fmt.Errorf("backup to %s: interrupted before it was done (%w); nothing was written there", path, ctx.Err())
		}
		if diskFull(err) {
			// SQLite's own words, "database or disk is full", could be taken for the
			// database backed up.
			err = fmt.Errorf("%w (the backup's disk is full: free space on it, or back up to another disk, and run backup again)", err)
		}
		return BackupInfo{}, fmt.Errorf("backup to %s: %w", path, err)
	}
	if what, err := DatabaseFile(path, dbPath); err != nil {
		return fail(err)
	} else if what != "" {
		return BackupInfo{}, fmt.Errorf("backup to %s: that is %s", path, what)
	}
	if err := replaceable(path); err != nil {
		return fail(err)
	}
	if err := earlierCopy(ctx, read, dbPath, path); err != nil {
		return fail(err)
	}
	RemoveLeftCopies(dbPath)
	RemoveLeftCopies(path)
	RemoveLeftCopiesIn(filepath.Dir(path))
	tmp, release, err := tempBeside(path)
	if err != nil {
		return fail(err)
	}
	defer release()
	defer removeDB(tmp) // gone after the rename; cleans up after a failure

	if err := copyTo(ctx, read, tmp); err != nil {
		return fail(err)
	}
	info, err := checkCopy(ctx, tmp)
	if err != nil {
		return fail(fmt.Errorf("the copy does not check: %w", err))
	}
	if _, info.Newer, _, err = pendingMigrations(ctx, tmp); err != nil {
		return fail(err)
	}
	// Run with sudo into the directory the service's backup timer uses, a backup of
	// root's, 0600, could be neither read (to prune it) nor written over by the timer.
	// The database's owner holds all that the copy holds; the directory's (a user's
	// home) may not.
	if err := ownLike(tmp, dbPath); err != nil {
		return fail(fmt.Errorf("give the backup to the database's owner: %w", err))
	}
	if err := syncFile(tmp); err != nil {
		return fail(err)
	}
	if err := clearLogs(path); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	info.Path = path
	return info, nil
}

// replaceable refuses a backup over anything but nothing or an earlier copy: a file
// that is no SQLite database (a mistyped name: the configuration, a report), or one a
// process has open (another instance's live database).
func replaceable(path string) error {
	// Without blocking: a FIFO there, opened to be looked at, would wait for a writer for
	// ever, past Ctrl-C.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if absent(err) {
		if to, lerr := os.Readlink(path); lerr == nil {
			// Renamed onto, the link would be replaced: the backup would stay on the disk
			// it was made to leave (the link's target on a disk not mounted), the link gone.
			return fmt.Errorf("it is %s: give the backup's own path (once its disk is there), or the name of a new file", storage.LinkToNothing(to))
		}
		// No file, yet its log may be there: its database was moved or removed without it.
		if log, err := heldLog(resolved(path)); err != nil {
			return err
		} else if log != "" {
			return strayLogError(log, ", or give the name of a new file")
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("it is %s, not a file: give the name of a new file, or of an earlier backup", storage.FileKind(st.Mode()))
	} else if st.Size() > 0 {
		head := make([]byte, len(sqliteHeader))
		if _, err := io.ReadFull(f, head); err != nil || string(head) != sqliteHeader {
			return errors.New("it exists and is not a SQLite database: give the name of a new file, or of an earlier backup")
		}
		if busy, err := InUse(path); err != nil {
			return err
		} else if busy {
			return errors.New("it is a database another process has open: give the name of a new file, or of an earlier backup")
		}
	}
	// An empty file is an empty database to SQLite, and nothing is lost, unless a log
	// beside it holds some.
	if log, err := heldLog(resolved(path)); err != nil {
		return err
	} else if log != "" {
		return fmt.Errorf("%s holds transactions of the file there: give the name of a new file, or of an earlier backup", log)
	}
	return nil
}

// heldLog returns the -wal or -journal beside path that holds transactions, or "" when
// neither does (an empty one holds none). SQLite takes such a log for the log of
// whatever file it next opens at path: a file renamed there, with no file there before
// or another one, would have another database's commits replayed into it, or rolled
// back over it, and be corrupted.
func heldLog(path string) (string, error) {
	for _, suffix := range []string{"-wal", "-journal"} {
		fi, err := os.Stat(path + suffix)
		if err == nil && fi.Size() > 0 {
			return path + suffix, nil
		}
		if err != nil && !absent(err) {
			return "", err
		}
	}
	return "", nil
}

// strayLogError refuses the log that holds transactions (heldLog) beside a path where
// its database no longer is, moved or removed without it; orElse ends the advice.
func strayLogError(log, orElse string) error {
	return fmt.Errorf("%s holds transactions of a database that is no longer there (moved or removed without it?): "+
		"move it along with its database, or remove it%s", log, orElse)
}

// clearLogs readies path to take a file renamed onto it: it refuses while a process has
// a database open there (storage.ErrInUse), or a -wal or -journal there holds
// transactions (heldLog), and otherwise removes them, with the -shm, which would index
// a log that is gone.
func clearLogs(path string) error {
	if busy, err := InUse(path); err != nil {
		return err
	} else if busy {
		return fmt.Errorf("%s: %w", path, storage.ErrInUse)
	}
	if log, err := heldLog(path); err != nil {
		return err
	} else if log != "" {
		return strayLogError(log, "")
	}
	for _, suffix := range []string{"-wal", "-journal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// earlierCopy refuses a backup of src, read through read (the snapshot's own reader),
// over the SQLite file at path unless that is an earlier copy of src or holds nothing:
// not another application's database, nor another hookdedup database (its identity is
// not src's), nor a later database than src, one that issued delivery ids src never did
// (the live one, stopped, named by an operator who meant restore): writing over it
// would lose what it holds since, and src's ids would be issued again. A restore
// carries the ids and the identity on, so a copy taken before one is still an earlier
// copy. When either side has no identity (made before identities, and not opened by
// this version since: a backup taken before the upgrade), the delivery ids alone judge.
func earlierCopy(ctx context.Context, read *sql.DB, src, path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil // nothing there, or what replaceable let through as empty
	}
	// Read as a closed file nothing writes to (replaceable found no process with it
	// open): a read-only open of a WAL database would leave a -wal and -shm beside it.
	c, err := openImmutable(path)
	if err != nil {
		return err
	}
	defer c.Close()
	kind, theirs, err := identify(ctx, c)
	if err != nil {
		return fmt.Errorf("cannot tell what database it is (%w): give the name of a new file, or of an earlier backup", err)
	}
	switch kind {
	case noSchema:
		return nil
	case otherApplication:
		return errors.New("it is a SQLite database that hookdedup did not make (another application's): give the name of a new file, or of an earlier backup")
	}
	_, ours, err := identify(ctx, read)
	if err != nil {
		return fmt.Errorf("read the identity of %s: %w", src, err)
	}
	if ours != "" && theirs != "" && ours != theirs {
		return fmt.Errorf("it is another hookdedup database (database id %s, and %s's is %s), not a copy of %s: give the name of a new file, or of an earlier backup of %s", theirs, src, ours, src, src)
	}
	issued, err := issuedIDsOf(ctx, c)
	if err != nil {
		return fmt.Errorf("read the delivery ids it issued: %w", err)
	}
	ownIssued, err := issuedIDsOf(ctx, read)
	if err != nil {
		return err
	}
	if issued > ownIssued {
		return fmt.Errorf("it holds more than %s (delivery ids up to %d against %d): it is a later database, not an earlier copy of this one; to put a backup back in place, use restore", src, issued, ownIssued)
	}
	return c.Close()
}

// sqliteHeader begins every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// copyTo copies every page of the database read reads into the empty file dst in one
// backup step, which holds one read transaction on the source: a consistent snapshot.
func copyTo(ctx context.Context, read *sql.DB, dst string) error {
	dstDB, err := sql.Open("sqlite3", fileURI(dst))
	if err != nil {
		return err
	}
	defer dstDB.Close()
	dconn, err := dstDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer dconn.Close()
	sconn, err := read.Conn(ctx)
	if err != nil {
		return err
	}
	defer sconn.Close()
	return dconn.Raw(func(d any) error {
		dc, ok := d.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", d)
		}
		return sconn.Raw(func(s any) error {
			sc, ok := s.(*sqlite3.SQLiteConn)
			if !ok {
				return fmt.Errorf("unexpected driver connection %T", s)
			}
			b, err := dc.Backup("main", sc, "main")
			if err != nil {
				return err
			}
			// Step(-1) copies everything at once; it reports not-done without an error
			// only while the source is busy or locked, which a WAL reader rarely is.
			for tries := 0; ; tries++ {
				done, err := b.Step(-1)
				if err != nil {
					b.Finish()
					return err
				}
				if done {
					break
				}
				if tries >= 300 || ctx.Err() != nil {
					b.Finish()
					return errors.Join(errors.New("source database stayed locked"), ctx.Err())
				}
				time.Sleep(100 * time.Millisecond)
			}
			return b.Finish()
		})
	})
}

// checkCopy opens the copy at path, runs PRAGMA integrity_check and counts what it holds.
func checkCopy(ctx context.Context, path string) (BackupInfo, error) {
	c, err := sql.Open("sqlite3", fileURI(path)+"?_busy_timeout=5000")
	if err != nil {
		return BackupInfo{}, err
	}
	defer c.Close()
	c.SetMaxOpenConns(1)
	var result string
	if err := c.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&result); err != nil {
		return BackupInfo{}, err
	}
	if result != "ok" {
		return BackupInfo{}, fmt.Errorf("integrity_check: %s", result)
	}
	var info BackupInfo
	if err := c.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM claims)`).
		Scan(&info.Deliveries, &info.Claims); err != nil {
		return BackupInfo{}, fmt.Errorf("not a hookdedup database: %w", err)
	}
	_, id, err := identify(ctx, c)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("read the database id: %w", err)
	}
	info.ID = id
	// Leave a single self-contained file: fold any WAL back in before closing.
	if _, err := c.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return BackupInfo{}, err
	}
	if err := c.Close(); err != nil {
		return BackupInfo{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return BackupInfo{}, err
	}
	info.Bytes = st.Size()
	return info, nil
}

// keptAsideInfix and keptAsideTime make the name under which a restore keeps the
// database it replaces: the database's, the infix, the time, and .2, .3 … after a
// name taken (keptAsideName). keptAside matches such a name.
const (
	keptAsideInfix = ".before-restore-"
	keptAsideTime  = "20060102T150405Z"
)

var keptAside = regexp.MustCompile(regexp.QuoteMeta(keptAsideInfix) + `[0-9]{8}T[0-9]{6}Z(\.[0-9]+)?$`)

// RestoreInfo says what a restore did.
type RestoreInfo struct {
	BackupInfo
	// Previous is where the database that was replaced now lies ("" when there was
	// none); it opens as it was, with its WAL.
	Previous string
}

// Restore replaces the database file at dbPath with a copy of the backup at from. It
// refuses (ErrInUse) while any process has the database open: a running serve would
// go on writing to the replaced file and lose what it wrote. The backup is copied and
// checked before anything is moved; the database it replaces is kept beside it as
// dbPath.before-restore-<time>, with its WAL, so a restore can itself be undone. A
// -wal or -journal that holds transactions at dbPath without a database there (one
// moved aside without it) is refused, as the restored file would take it for its own.
// The restored database is the one backed up, and keeps its identity: backups taken of
// it before stay earlier copies of it.
func Restore(ctx context.Context, from, dbPath string) (RestoreInfo, error) {
	return restore(ctx, from, dbPath, false)
}

// RestoreCopy is Restore for a copy that is to be another database from then on (a
// rehearsal of a restore, a test system): it gets an identity of its own, so that its
// backups are never taken for the original's, pruned with them or written over them.
func RestoreCopy(ctx context.Context, from, dbPath string) (RestoreInfo, error) {
	return restore(ctx, from, dbPath, true)
}

func restore(ctx context.Context, from, dbPath string, copyOf bool) (RestoreInfo, error) {
	fail := func(err error) (RestoreInfo, error) {
		if interrupted(ctx, err) {
			// Before the swap, where alone the context is read: "the backup does not
			// check" would read as a damaged backup.
			return RestoreInfo{}, fmt.Errorf("restore %s from %s: interrupted before it was done (%w); the database is as it was", dbPath, from, ctx.Err())
		}
		if diskFull(err) {
			err = fmt.Errorf("%w (the disk is full: free space on it and run restore again)", err)
		}
		return RestoreInfo{}, fmt.Errorf("restore %s from %s: %w", dbPath, from, err)
	}
	named := dbPath
	dbPath = resolved(dbPath)
	// The backup's own -wal and -journal lie beside the file a link points to.
	from = resolved(from)
	// Looked for first: missing, the first thing to fail would be the copy beside the
	// database, in a directory a new machine may not have yet, and its name, not the
	// backup's, would be the one said not to exist.
	if fi, err := os.Stat(from); err != nil {
		// A link to nothing (its disk not mounted) is there for ls: "no such file" of
		// its name alone would send the operator looking for a typo.
		if to, lerr := os.Readlink(from); lerr == nil && absent(err) {
			err = fmt.Errorf("%s is %s: %w", from, storage.LinkToNothing(to), os.ErrNotExist)
		}
		return fail(err)
	} else if fi.Mode().IsRegular() && fi.Size() == 0 {
		// Read as a database, it would be one without hookdedup's tables; a pipe
		// (<(gunzip -c …)) says no size, and is read as it comes.
		return fail(fmt.Errorf("%s is empty (0 bytes): a backup cut short before it began, or not a backup", from))
	} else if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeNamedPipe == 0 {
		// A device would be copied as it reads: /dev/zero until the disk is full.
		return fail(fmt.Errorf("%s is %s, not a backup: give a backup's file, or a pipe that gives one (<(gunzip -c FILE.gz))", from, storage.FileKind(fi.Mode())))
	}
	// A FIFO or a device at the database's path is no database to replace: read for the
	// ids it issued, a FIFO would hold the restore in its open.
	if err := refuseNotAFile(dbPath); err != nil {
		return fail(err)
	}
	if same, err := sameFile(from, dbPath); err != nil {
		return fail(err)
	} else if same {
		return fail(errors.New("that is the database itself"))
	}
	if busy, err := InUse(dbPath); err != nil {
		return fail(err)
	} else if busy {
		return fail(storage.ErrInUse)
	}
	if busy, err := InUse(from); err != nil {
		return fail(err)
	} else if busy {
		return fail(fmt.Errorf("%s is open in another process: restore a backup, a file no process is writing to", from))
	}
	// An empty WAL holds no transaction: a read-only open leaves one behind, as
	// issuedIDs does on the database a restore keeps aside. One that holds some is part
	// of the database a restore kept aside (a crash left it so, and the restore moved
	// it there, where no process has it open): it is copied with the file, and the
	// copy's first open folds it in. Beside any other backup it may be another
	// process's, written as it is copied: refused. Nor does an empty rollback journal
	// hold anything, which SQLite never reads back (a crash between its creation and
	// its first write leaves one).
	wal := false
	for _, suffix := range []string{"-wal", "-journal"} {
		fi, err := os.Stat(from + suffix)
		if err != nil || fi.Size() == 0 {
			continue
		}
		if suffix == "-wal" && keptAside.MatchString(filepath.Base(from)) {
			wal = true
			continue
		}
		return fail(fmt.Errorf("%s%s exists: the backup is open or was not closed cleanly; once no process has it open, "+
			"take a copy of it with hookdedup backup --database %s COPY, which reads its %s, and restore that", from, suffix, from, suffix))
	}
	// A directory the restore cannot write in fails the read of the ids below first
	// (SQLite's "unable to open database file"), which would be taken for a database
	// that cannot be read, to be moved aside at the cost of its ids.
	if dir := filepath.Dir(dbPath); !missing(dir) {
		if why := syscall.Access(dir, 2 /* W_OK */); why != nil {
			advice := "run restore as a user who may write to it (the one serve runs as)"
			if errors.Is(why, syscall.EROFS) {
				advice = "restore onto a writable file system"
			}
			return fail(fmt.Errorf("its directory %s is not writable (%v): the restored database is written there; %s", dir, why, advice))
		}
	}
	// The ids the database being replaced has issued: providers were answered them, and
	// the downstream was sent them, so the restored database must not issue them again.
	var issued int64
	var previousID string
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		// Looked for before the copy, and again before the rename (clearLogs).
		if log, err := heldLog(dbPath); err != nil {
			return fail(err)
		} else if log != "" {
			return fail(strayLogError(log, ", then restore"))
		}
	} else if err == nil {
		if issued, previousID, err = issuedIDs(ctx, dbPath); err != nil {
			if diskFull(err) {
				// Not the database's fault: moving it aside, as the advice below says,
				// would give up the ids it issued for nothing.
				return fail(fmt.Errorf("read the delivery ids issued by the database it would replace: %w", err))
			}
			return fail(fmt.Errorf("read the delivery ids issued by the database it would replace: %w "+
				"(to restore without it, move it aside first, with its -wal and -shm: the ids it issued since the backup may then be issued again)", err))
		}
	} else {
		return fail(err)
	}
	RemoveLeftCopies(dbPath)
	tmp, release, err := tempBeside(dbPath)
	if err != nil {
		return fail(err)
	}
	defer release()
	defer removeDB(tmp)
	if err := copyFile(ctx, from, tmp); err != nil {
		return fail(err)
	}
	if wal {
		// Made 0600 before it is written: it holds the same deliveries.
		f, err := os.OpenFile(tmp+"-wal", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			err = f.Close()
		}
		if err == nil {
			err = copyFile(ctx, from+"-wal", tmp+"-wal")
		}
		if err != nil {
			return fail(err)
		}
	}
	info, err := checkCopy(ctx, tmp)
	if err != nil {
		return fail(fmt.Errorf("the backup does not check: %w", err))
	}
	// Told here, of the backup: the open that continues the ids would refuse it as "the
	// database", naming the interim copy, which is gone by the time anyone looks.
	if _, newer, _, err := pendingMigrations(ctx, tmp); err != nil {
		return fail(err)
	} else if len(newer) > 0 {
		return fail(storage.NewerBackupError(newer))
	}
	// A backup of another database than the one it replaces would give two databases
	// one identity (the other still running elsewhere, or its backups in a shared
	// directory), and each one's backups would be taken for the other's.
	if !copyOf && previousID != "" && info.ID != "" && info.ID != previousID {
		return fail(fmt.Errorf("the backup is of another hookdedup database (database id %s) than the one it would replace (%s): "+
			"restore it with --copy to make it a database of its own here, or move %s aside first, with its -wal and -shm (serve made it on a new machine), "+
			"to restore it as the database it is", info.ID, previousID, dbPath))
	}
	// A backup taken before identities has none, and takes the identity of the
	// database it replaces, not a new one; a copy takes a new one.
	keepID := info.ID
	if copyOf {
		if keepID, err = newDatabaseID(); err != nil {
			return fail(err)
		}
	} else if keepID == "" {
		keepID = previousID
	}
	if info.ID, err = continueIDs(ctx, tmp, issued, keepID); err != nil {
		return fail(err)
	}
	// Run with sudo on the service's database, a restored file of root's, 0600, could
	// not be opened by the service's serve: it would not start again. With no database
	// there, the directory's owner is the service's.
	owner := dbPath
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		owner = filepath.Dir(dbPath)
	}
	if err := ownLike(tmp, owner); err != nil {
		return fail(fmt.Errorf("give the restored database to its owner: %w", err))
	}
	if err := syncFile(tmp); err != nil {
		return fail(err)
	}

	out := RestoreInfo{BackupInfo: info}
	out.Path = named
	// The second name of a database still at its path, removed if the restore fails
	// before the restored file takes that path.
	linked := ""
	defer func() {
		if linked != "" {
			os.Remove(linked)
		}
	}()
	if _, err := os.Stat(dbPath); err == nil {
		// The serve lock, from before the database takes a second name until the
		// restored file has its path: another command's open (dropAliasedKeptAside)
		// would take that name for one a killed restore left, and remove it, and the
		// database it replaces would be lost with the rename. A serve started meanwhile
		// is refused by it.
		unlock, err := lockForRestore(dbPath)
		if err != nil {
			return fail(err)
		}
		defer unlock()
		// The check again, as late as possible: a serve may have started meanwhile.
		if busy, err := InUse(dbPath); err != nil {
			return fail(err)
		} else if busy {
			return fail(storage.ErrInUse)
		}
		if out.Previous, err = keptAsideName(dbPath + keptAsideInfix + time.Now().UTC().Format(keptAsideTime)); err != nil {
			return fail(fmt.Errorf("keep the database it replaces aside: %w", err))
		}
		// The database stays at its path, under a second name, until the restored
		// file is renamed over it: a restore killed before that rename leaves it
		// there, where a path with no file would have the next serve make an empty
		// database and take every redelivery for a new event. A log that holds
		// commits cannot move along at the same instant: the database is renamed
		// aside with it, and a serve started before the restored file is in place
		// refuses the path (refuseStrayLog) rather than leave the log behind.
		held, err := heldLog(dbPath)
		if err != nil {
			return fail(err)
		}
		if held == "" && os.Link(dbPath, out.Previous) == nil {
			linked = out.Previous
		} else if err := os.Rename(dbPath, out.Previous); err != nil {
			return fail(err)
		}
		// A log belongs to its database: it moves along, or the restored file would
		// have the old one's last transactions replayed into it (or rolled back over
		// it). An empty one holds none (issuedIDs' read-only open leaves a WAL behind)
		// and is dropped, so that the database kept aside can itself be restored to
		// undo this restore.
		for _, suffix := range []string{"-wal", "-journal"} {
			if err := moveLog(dbPath+suffix, out.Previous+suffix); err != nil {
				return fail(err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	// Whatever is left beside the path: the logs of a database moved or removed without
	// them are not the restored file's.
	if err := clearLogs(dbPath); err != nil {
		return fail(err)
	}
	beforeRestoreSwap()
	if err := os.Rename(tmp, dbPath); err != nil {
		return fail(err)
	}
	linked = ""
	if err := SyncDir(filepath.Dir(dbPath)); err != nil {
		return fail(err)
	}
	return out, nil
}

// dropAliasedKeptAside removes each name a restore keeps a database aside under
// (keptAsideInfix) that is the database at path itself: a restore killed after it
// linked the database aside, before it renamed the restored file over it, leaves the
// live database under that name too, which every later write would change while it
// passed for the copy the restore replaced. Removing a second name of a file loses
// nothing.
//
// It removes none while another process holds the serve lock: a restore holds it while
// the database has that second name on purpose (lockForRestore), and a serve started
// with its database's aliases already gone.
func dropAliasedKeptAside(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	lock, err := os.OpenFile(resolved(path)+ServeLockSuffix, os.O_RDWR, 0)
	if err == nil {
		defer lock.Close() // which lets the lock go
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	prefix := filepath.Base(path) + keptAsideInfix
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		name := filepath.Join(filepath.Dir(path), e.Name())
		if ai, err := os.Lstat(name); err == nil && os.SameFile(fi, ai) {
			os.Remove(name)
		}
	}
}

// lockForRestore takes the serve lock of the database at path (lockServe) for a restore,
// waiting a moment for a command that holds it while it drops a restore's leftover
// name (dropAliasedKeptAside); a serve holding it is ErrInUse. It returns the function
// that lets it go. Where no lock can be had (no flock, a directory not there yet), it
// goes on without.
func lockForRestore(path string) (unlock func(), err error) {
	for try := 0; ; try++ {
		f, err := lockServe(path)
		switch {
		case errors.Is(err, ErrServed) && try < 50:
			time.Sleep(20 * time.Millisecond)
			continue
		case errors.Is(err, ErrServed):
			return nil, storage.ErrInUse
		case err != nil:
			return nil, err
		case f == nil:
			return func() {}, nil
		}
		return func() { f.Close() }, nil
	}
}

// beforeRestoreSwap runs just before a restore renames the restored file onto the
// database's path; tests stop a restore there.
var beforeRestoreSwap = func() {}

// moveLog renames the -wal or -journal at from to to, or removes it when it is empty;
// one that is not there is no error.
func moveLog(from, to string) error {
	fi, err := os.Stat(from)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Size() == 0:
		return os.Remove(from)
	}
	return os.Rename(from, to)
}

// keptAsideName is name, or name with a number after it when a database (or its WAL)
// is already kept there: a second restore within the same second would otherwise
// rename its interim database over the one the first restore set aside. Returns the
// error of a name that cannot be looked at (too long, a directory it may not read):
// no number after it would do better.
func keptAsideName(name string) (string, error) {
	taken := func(p string) (bool, error) {
		for _, suffix := range []string{"", "-wal", "-journal"} {
			_, err := os.Lstat(p + suffix)
			if err == nil {
				return true, nil
			}
			if !errors.Is(err, os.ErrNotExist) {
				return false, err
			}
		}
		return false, nil
	}
	out := name
	for i := 2; ; i++ {
		if t, err := taken(out); err != nil || !t {
			return out, err
		}
		out = fmt.Sprintf("%s.%d", name, i)
	}
}

// interrupted reports whether err is ctx's end (Ctrl-C, a stop) rather than a failure
// of what was being done.
func interrupted(ctx context.Context, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	var se sqlite3.Error
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &se) && se.Code == sqlite3.ErrInterrupt)
}

// diskFull reports whether err says that the disk (or the user's quota on it) is full.
func diskFull(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrFull || se.SystemErrno == syscall.ENOSPC || se.SystemErrno == syscall.EDQUOT) {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// issuedIDs returns the highest delivery id that the database at path has issued: its
// sequence's, or (a database older than the sequence) the highest id it names anywhere,
// as the migration that made the sequence counts it; and its identity ("" for a
// database made before identities). The database is opened read-only.
func issuedIDs(ctx context.Context, path string) (int64, string, error) {
	c, err := sql.Open("sqlite3", fileURI(path)+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetMaxOpenConns(1)
	kind, id, err := identify(ctx, c)
	if err != nil {
		return 0, "", err
	}
	if kind == otherApplication {
		// Not the database the configuration meant: nothing of hookdedup's to carry on.
		return 0, "", otherApplicationError(path)
	}
	n, err := issuedIDsOf(ctx, c)
	if err != nil {
		return 0, "", err
	}
	return n, id, c.Close()
}

// issuedIDsOf is issuedIDs of the database c reads. A table it lacks names no id: an
// empty file (a first serve that failed on a full disk) issued none, nor did one whose
// first migrations alone committed.
func issuedIDsOf(ctx context.Context, c *sql.DB) (int64, error) {
	rows, err := c.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		return 0, err
	}
	tables := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return 0, err
		}
		tables[name] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	// The sequence is above every id named anywhere; the deliveries' own max is one
	// seek, and covers a row stored without the sequence. Without the sequence, every id
	// still named anywhere, as migration 0006 counts them: the roll-up's mark too, which
	// names a delivery that may have been swept since.
	named := []struct{ table, expr string }{{"delivery_seq", "max(last)"}, {"deliveries", "max(id)"}}
	if !tables["delivery_seq"] {
		named = append(named[1:], struct{ table, expr string }{"claims", "max(first_delivery)"},
			struct{ table, expr string }{"attempts", "max(delivery)"},
			struct{ table, expr string }{"delivery_stats_mark", "max(rolled_up_to)"})
	}
	q := `SELECT max(0`
	for _, n := range named {
		if tables[n.table] {
			q += fmt.Sprintf(`, (SELECT coalesce(%s, 0) FROM %s)`, n.expr, n.table)
		}
	}
	var n int64
	err = c.QueryRowContext(ctx, q+`, 0)`).Scan(&n)
	return n, err
}

// continueIDs brings the database at path (a restored copy, not yet in place) up to
// date and makes its delivery sequence go on after issued: the ids that the database it
// replaces issued after the backup are never issued again. It gives the database the
// identity id, unless id is "" (then the one it has, or the one its migration makes),
// and returns the identity it has.
func continueIDs(ctx context.Context, path string, issued int64, id string) (string, error) {
	db, err := Open(path, Options{MustExist: true})
	if err != nil {
		return "", err
	}
	_, err = db.writeExec(ctx, `UPDATE delivery_seq SET last = max(last, ?) WHERE only = 1`, issued)
	if err != nil {
		err = fmt.Errorf("continue the delivery ids after %d: %w", issued, err)
	}
	if err == nil && id != "" {
		if _, err = db.writeExec(ctx, `UPDATE settings SET value = ? WHERE name = ?`, id, databaseIDSetting); err != nil {
			err = fmt.Errorf("keep the database id %s: %w", id, err)
		}
	}
	if err == nil {
		id, err = db.Setting(ctx, databaseIDSetting)
	}
	// Closing the last connection folds the WAL back in: one self-contained file again.
	return id, errors.Join(err, db.Close())
}

// InUse reports whether a process has the SQLite database at path open. Every
// connection to a WAL database holds a shared POSIX lock on the "DMS" byte of its -shm
// file for as long as it is open (https://sqlite.org/walformat.html, "The DMS lock");
// the test asks the kernel whether anyone holds it, without taking it. Locks of the
// calling process itself do not count. Never call it in a process that has the
// database open: it opens and closes the -shm, and a close drops every POSIX lock the
// process holds on that file, SQLite's own included.
func InUse(path string) (bool, error) {
	f, err := os.OpenFile(resolved(path)+"-shm", os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // no -shm: nobody has the database open in WAL mode
	}
	if err != nil {
		return false, fmt.Errorf("check whether %s is in use: %w", path, err)
	}
	defer f.Close()
	const dmsByte = 128 // 120 (first lock byte) + 8 (SQLITE_SHM_NLOCK)
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: dmsByte, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false, fmt.Errorf("check whether %s is in use: %w", path, err)
	}
	return lk.Type != syscall.F_UNLCK, nil
}

// resolved is path with its symbolic links resolved, or path as it is when that fails
// (nothing there yet). SQLite names the -wal and -shm after the resolved path, so they
// lie beside the file a link points to, not beside the link.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// tempBeside returns the name of a new empty file in path's directory, so that a
// rename onto path is atomic. The file is 0600 whatever the umask: it becomes a backup,
// or the database, and holds the database's secrets. It stays locked (flock) until
// release is called, after SQLite has closed it (closing the lock's descriptor drops
// the POSIX locks the process holds on the file): a copy as large as the database, left
// by a process killed meanwhile, is unlocked, and RemoveLeftCopies removes it. On a file
// system without flock the copy goes unlocked, and is never taken for a left one.
func tempBeside(path string) (name string, release func(), err error) {
	for range 10 {
		f, err := os.CreateTemp(filepath.Dir(path), tempPrefix(path)+"*"+tempSuffix)
		if err != nil {
			return "", nil, err
		}
		name = f.Name()
		if err := f.Chmod(privateFile); err != nil {
			f.Close()
			os.Remove(name)
			return "", nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
			return name, func() { f.Close() }, nil
		}
		// Another process's RemoveLeftCopies may have locked and removed the file
		// between its creation and the lock: then the lock is on a file no longer at
		// the name, and the copy would go at the name unlocked.
		if err == nil && samePathFile(f, name) {
			return name, func() { f.Close() }, nil
		}
		f.Close()
		if err == nil {
			os.Remove(name)
		}
	}
	return "", nil, fmt.Errorf("could not make a locked file beside %s", path)
}

// samePathFile reports whether f is the file at name.
func samePathFile(f *os.File, name string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(name)
	return err == nil && os.SameFile(a, b)
}

const tempSuffix = ".tmp"

func tempPrefix(path string) string { return "." + filepath.Base(path) + "." }

// leftCopyAge is how long a copy goes unmodified before RemoveLeftCopies may take it for
// left: a copy is written continuously until it is complete, and read, never written,
// only while its maker holds its lock.
const leftCopyAge = time.Minute

// RemoveLeftCopies removes the copies that tempBeside made beside path
// (.<name>.<digits>.tmp) and that no process holds any more: left by a backup, restore
// or migrate killed before it could remove its own, as large as the database. A copy
// is left alone while another process holds its lock or has it open as a database, and
// for a minute after it was last written: it may be one another process has only just
// made.
func RemoveLeftCopies(path string) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if of, ok := leftCopyOf(e.Name()); ok && of == base && e.Type().IsRegular() {
			removeLeftCopy(filepath.Join(dir, e.Name()))
		}
	}
}

// leftCopyOf returns the name of the file that name, a name tempBeside gives
// (.<file>.<digits>.tmp), is a copy beside; ok false for any other name.
func leftCopyOf(name string) (of string, ok bool) {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return "", false
	}
	if rest, ok = strings.CutSuffix(rest, tempSuffix); !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 || strings.Trim(rest[i+1:], "0123456789") != "" {
		return "", false
	}
	return rest[:i], true
}

// RemoveLeftCopiesIn removes the copies that tempBeside made beside any file in dir and
// that no process holds any more (RemoveLeftCopies): a backup to a dated name
// (backups/hookdedup-$(date +%F).db) killed before its rename leaves its copy under
// that day's name, where no later backup, to another day's, would come across it, and
// a daily timer's directory would fill with them. As the name alone could be another
// program's, only a file that is empty or begins as a SQLite database is taken for one,
// or with zeros (the copy's first page may not be written yet when the copy is
// killed), and not one that reads as another program's whole database.
func RemoveLeftCopiesIn(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if _, ok := leftCopyOf(e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		if p := filepath.Join(dir, e.Name()); emptyOrSQLite(p) && !otherApplicationsFile(p) {
			removeLeftCopy(p)
		}
	}
}

// otherApplicationsFile reports whether the file at path reads as a whole SQLite
// database that hookdedup did not make (identify): another program's copy under a name
// of the same shape, which is not hookdedup's to remove. A copy killed part way reads as
// nothing whole, and goes.
func otherApplicationsFile(path string) bool {
	c, err := openImmutable(path)
	if err != nil {
		return false
	}
	defer c.Close()
	kind, _, err := identify(context.Background(), c)
	return err == nil && kind == otherApplication
}

// IsDatabaseFile reports whether the file at path begins as a SQLite database does.
func IsDatabaseFile(path string) bool {
	head, err := fileHead(path)
	return err == nil && string(head) == sqliteHeader
}

// emptyOrSQLite reports whether the file at path is empty or begins with SQLite's
// header, or with as many zeros.
func emptyOrSQLite(path string) bool {
	head, err := fileHead(path)
	return err == nil && (len(head) == 0 || string(head) == sqliteHeader ||
		len(head) == len(sqliteHeader) && strings.Trim(string(head), "\x00") == "")
}

// fileHead returns the first len(sqliteHeader) bytes of the file at path, fewer when
// the file is shorter. A path that is no regular file (a FIFO, a device) has none: it
// is opened without waiting, as opening a FIFO to read waits for a writer, and not read.
func fileHead(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	return head[:n], err
}

// removeLeftCopy removes the copy at name, and the files SQLite keeps beside it, if no
// process holds it (RemoveLeftCopies). A copy that a process reads as a database (an
// earlier version's migrate, which took no lock) is in use by SQLite's own locks; that
// look is safe here, as this process does not hold the copy (its lock was free).
func removeLeftCopy(name string) {
	f, err := os.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || time.Since(fi.ModTime()) < leftCopyAge {
		return
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || !samePathFile(f, name) {
		return
	}
	if busy, err := InUse(name); err != nil || busy {
		return
	}
	removeDB(name)
}

// removeDB removes a database file and the files SQLite keeps beside it.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
}

// DatabaseFile says which file of the database at db the path names, if any: the
// database itself, or its -wal, -shm, -journal or serve lock, existing or not, through
// symbolic links (SQLite keeps the side files beside the link's target, and serve its
// lock); "" when it is none of them. A file written there would destroy the database:
// renamed over, the -wal would take the commits not yet checkpointed out of every path,
// and SQLite would read the file as its log; and the running serve would hold a lock
// on a file no longer there, so that a second serve could lock the new one and run on
// the same database.
func DatabaseFile(path, db string) (string, error) {
	target := resolved(db)
	for _, side := range []struct{ suffix, what string }{
		{"", "the database itself"}, {"-wal", "the database's write-ahead log (-wal)"},
		{"-shm", "the database's shared-memory index (-shm)"}, {"-journal", "the database's rollback journal (-journal)"},
		{ServeLockSuffix, "the database's serve lock (" + ServeLockSuffix + "), which keeps a second serve off it"},
	} {
		same, err := sameFile(path, target+side.suffix)
		if err != nil {
			return "", err
		}
		if same || samePath(path, db+side.suffix) || samePath(path, target+side.suffix) {
			return side.what, nil
		}
	}
	return "", nil
}

// sameFile reports whether a and b name one existing file.
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// samePath reports whether a and b name one path once made absolute, their
// directories' symbolic links resolved; unlike sameFile, neither need exist.
func samePath(a, b string) bool {
	resolve := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return filepath.Clean(p)
		}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			return filepath.Join(dir, filepath.Base(abs))
		}
		return abs
	}
	return resolve(a) == resolve(b)
}

// copyFile copies the file from into to, until ctx ends: closing from then ends a read
// that waits on a pipe whose writer stalled (<(gunzip -c …)), and a file's copy at its
// next round, where the copy would otherwise go on past Ctrl-C.
func copyFile(ctx context.Context, from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	stop := context.AfterFunc(ctx, func() { src.Close() })
	defer stop()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		if ctx.Err() != nil {
			return ctx.Err() // the close's "file already closed" would hide why
		}
		return err
	}
	return dst.Close()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir makes the names in the directory dir durable: a file renamed into it is
// there after a power cut only once its directory is synced.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// IntegrityCheck runs SQLite's PRAGMA integrity_check on the database and returns an
// error naming the first problems it finds.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	rows, err := db.read.QueryContext(ctx, `PRAGMA integrity_check(20)`)
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check: %s", strings.Join(problems, "; "))
	}
	return nil
}
