package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// Snapshot is a database file opened read-only and held in one read transaction, so
// that every table read from it is of one moment: a copy into another engine
// (storage.TableSource). It never writes the file.
type Snapshot struct {
	conn *sql.DB
	tx   *sql.Tx
	// path is the file asked for, and seen how it was when the snapshot began: a
	// process that writes it during the copy (a serve started meanwhile) changes it.
	path string
	seen fileState
	// upgraded is the copy of an older file brought up to this build's schema, which
	// is what the snapshot reads; "" when it reads the file itself.
	upgraded string
	release  func() // lets go of upgraded's lock (tempBeside)
}

var _ storage.TableSource = (*Snapshot)(nil)

// OpenSnapshot opens the database at path read-only and begins its snapshot. A file of
// an earlier schema is read through a copy beside it, upgraded to this build's schema
// and removed on Close: the file itself is left as it is, for the earlier version to
// run on again. Returns an error wrapping storage.ErrNoDatabase when there is no file
// at path.
func OpenSnapshot(ctx context.Context, path string) (_ *Snapshot, err error) {
	if missing(path) {
		return nil, fmt.Errorf("open database %s: %w", path, storage.ErrNoDatabase)
	}
	// Read under a second name, the file is read without the log serve keeps beside the
	// first: a migration would copy it without every commit still in that log.
	if err := refuseSecondNames(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s := &Snapshot{path: path, seen: stateOf(path)}
	// Before the upgraded copy, whose open would refuse it under the copy's name.
	if err := refuseOtherApplicationFile(ctx, path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	read := path
	pending, unknown, _, err := pendingMigrations(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if len(unknown) > 0 {
		// Read as it is, a newer schema's tables and columns this build does not know
		// would be left out of every copy made from it, without a word.
		return nil, fmt.Errorf("open database %s: %w", path, storage.NewerSchemaError(unknown))
	}
	if len(pending) > 0 {
		if s.upgraded, s.release, err = upgradedCopy(ctx, path); err != nil {
			return nil, fmt.Errorf("open database %s: an upgraded copy to read: %w", path, err)
		}
		defer func() {
			if err != nil {
				removeDB(s.upgraded)
				s.release()
			}
		}()
		read = s.upgraded
	}
	conn := openReadOnly(read, 5*time.Second)
	conn.SetMaxOpenConns(1)
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err == nil {
		// A read transaction takes its snapshot at its first read, not at BEGIN.
		_, err = tx.ExecContext(ctx, `SELECT count(*) FROM sqlite_schema`)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s.conn, s.tx = conn, tx
	return s, nil
}

// pendingMigrations names this build's migrations that the database at path has not
// recorded and those it has recorded that this build does not know (a newer version's),
// reading it as it is, and counts those it has. A file with no migrations table has none
// applied.
func pendingMigrations(ctx context.Context, path string) (pending, unknown []string, applied int, err error) {
	read := openReadOnly(path, 5*time.Second)
	defer read.Close()
	var tables int
	if err := read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'migrations'`).
		Scan(&tables); err != nil {
		return nil, nil, 0, fmt.Errorf("read applied migrations: %w", err)
	}
	done := map[string]bool{}
	if tables > 0 {
		rows, err := read.QueryContext(ctx, `SELECT name FROM migrations`)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read applied migrations: %w", err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return nil, nil, 0, fmt.Errorf("read applied migrations: %w", err)
			}
			done[name] = true
		}
		if err := rows.Close(); err != nil {
			return nil, nil, 0, err
		}
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, nil, 0, err
	}
	for _, n := range names {
		if !done[n] {
			pending = append(pending, n)
		}
	}
	for n := range done {
		if !slices.Contains(names, n) {
			unknown = append(unknown, n)
		}
	}
	slices.Sort(unknown)
	return pending, unknown, len(done), nil
}

// upgradedCopy copies the database at path beside it and brings the copy up to this
// build's schema; it returns the copy's name, which the caller removes (removeDB)
// before it calls release (tempBeside).
func upgradedCopy(ctx context.Context, path string) (string, func(), error) {
	RemoveLeftCopies(path)
	tmp, release, err := tempBeside(path)
	if err != nil {
		return "", nil, err
	}
	// Straight into the locked file: BackupFile would rename a copy of its own over it,
	// and the copy at tmp would be another file, unlocked.
	read := openReadOnly(path, 5*time.Second)
	err = copyTo(ctx, read, tmp)
	read.Close()
	if err != nil {
		removeDB(tmp)
		release()
		return "", nil, err
	}
	db, err := Open(tmp, Options{MustExist: true, NoReadAhead: true})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		removeDB(tmp)
		release()
		return "", nil, err
	}
	return tmp, release, nil
}

// fileState is what a write to a database leaves on its files: the size and time of
// the file and of a WAL that holds anything (a read-only open leaves an empty one).
type fileState struct {
	size, walSize int64
	mod, walMod   time.Time
}

func stateOf(path string) fileState {
	var s fileState
	if fi, err := os.Stat(path); err == nil {
		s.size, s.mod = fi.Size(), fi.ModTime()
	}
	if fi, err := os.Stat(resolved(path) + "-wal"); err == nil && fi.Size() > 0 {
		s.walSize, s.walMod = fi.Size(), fi.ModTime()
	}
	return s
}

// Unchanged returns an error when a process has written the file since the snapshot
// began, or (when the snapshot reads an upgraded copy) has it open now: what it stored
// meanwhile is not in the copy. A snapshot of the file itself does not ask InUse: the
// close of its descriptor of the -shm would drop the snapshot connection's locks.
func (s *Snapshot) Unchanged(ctx context.Context) error {
	if s.upgraded != "" {
		if busy, err := InUse(s.path); err != nil {
			return err
		} else if busy {
			return fmt.Errorf("%s was opened by another process during the copy (a serve?): stop it, then copy again", s.path)
		}
	}
	if stateOf(s.path) != s.seen {
		return fmt.Errorf("%s was written during the copy (a serve started and stopped?): copy again", s.path)
	}
	return nil
}

// identifier is a table or column name fit to be written into a query.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ReadTable calls fn with each row of table, in the order of its first column, its
// values in the order of columns.
func (s *Snapshot) ReadTable(ctx context.Context, table string, columns []string, fn func(row []any) error) error {
	for _, n := range append([]string{table}, columns...) {
		if !identifier.MatchString(n) {
			return fmt.Errorf("read table %s: %q is no table or column name", table, n)
		}
	}
	rows, err := s.tx.QueryContext(ctx, `SELECT `+strings.Join(columns, ", ")+` FROM `+snapshotFrom(table)+` ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("read table %s: %w", table, err)
	}
	defer rows.Close()
	vals := make([]any, len(columns))
	ptrs := make([]any, len(columns))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read table %s: %w", table, err)
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read table %s: %w", table, err)
	}
	return nil
}

// snapshotFrom is what a copy reads as table: the business and correlation keys not yet
// moved into their indexed tables (forensics.go) are theirs, with the same columns, and
// their hashes are the hex text every engine stores (a hash of 32 bytes is stored as
// such here: storedHash).
func snapshotFrom(table string) string {
	switch table {
	case "business_keys":
		return `(SELECT source, ` + sqlHashText + ` AS hash, delivery, seen_at FROM business_keys UNION ALL
	SELECT source, ` + sqlHashText + `, delivery, seen_at FROM forensic_keys_pending WHERE rule = '')`
	case "correlation_keys":
		return `(SELECT rule, ` + sqlHashText + ` AS hash, source, delivery, seen_at FROM correlation_keys UNION ALL
	SELECT rule, ` + sqlHashText + `, source, delivery, seen_at FROM forensic_keys_pending WHERE rule != '')`
	}
	return table
}

// sqlHashText is a stored business or correlation key's hash as its text.
const sqlHashText = `CASE WHEN typeof(hash) = 'blob' THEN lower(hex(hash)) ELSE hash END`

// CountRows returns how many rows table holds.
func (s *Snapshot) CountRows(ctx context.Context, table string) (int64, error) {
	if !identifier.MatchString(table) {
		return 0, fmt.Errorf("count table %s: not a table name", table)
	}
	var n int64
	if err := s.tx.QueryRowContext(ctx, `SELECT count(*) FROM `+snapshotFrom(table)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count table %s: %w", table, err)
	}
	return n, nil
}

// Close ends the snapshot and closes the file, and removes the upgraded copy it read.
func (s *Snapshot) Close() error {
	s.tx.Rollback()
	err := s.conn.Close()
	if s.upgraded != "" {
		removeDB(s.upgraded)
		s.release()
	}
	return err
}
