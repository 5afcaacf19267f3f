package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// auditChainMigration is the migration that adds the chain's hashes.
const auditChainMigration = "migrations/0016_audit_chain.sql"

// AuditFile is a database opened read-only to check or export its audit log, for a
// verifier, which must not change what it checks. Unlike Open it never migrates,
// creates or writes the database file, so it can check an auditor's copy as it is, or
// the live file while serve writes to it. SQLite reads a WAL database through its
// -wal and -shm: when the database has none (it was closed cleanly), SQLite creates
// them, empty and with the database file's mode, and leaves them; the database file
// itself is left byte for byte as it was.
type AuditFile struct {
	path string
	read *sql.DB
}

// OpenAuditFile opens the database at path read-only; a write by another process
// (serve) is waited for up to busyTimeout. Returns storage.ErrNoDatabase when there is no
// file at path, storage.ErrNotHookdedup for an SQLite file hookdedup did not make, and
// storage.ErrAuditSchema for a database whose schema predates the audit chain.
func OpenAuditFile(ctx context.Context, path string, busyTimeout time.Duration) (*AuditFile, error) {
	if missing(path) {
		return nil, fmt.Errorf("open database %s: %w", path, storage.ErrNoDatabase)
	}
	// Read under a second name, the file is read without the log serve keeps beside the
	// first, and the chain checked is not the one serve writes.
	if err := refuseSecondNames(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if busyTimeout <= 0 {
		busyTimeout = 5 * time.Second
	}
	read := openReadOnly(path, busyTimeout)
	f := &AuditFile{path: path, read: read}
	if err := f.checkSchema(ctx); err != nil {
		read.Close()
		return nil, fmt.Errorf("open database %s: %w", path, unwritableDir(path, err))
	}
	return f, nil
}

func (f *AuditFile) checkSchema(ctx context.Context) error {
	var tables int
	err := f.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'migrations'`).Scan(&tables)
	if err != nil {
		return err
	}
	if tables == 0 {
		return storage.ErrNotHookdedup
	}
	var chained int
	if err := f.read.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE name = ?`, auditChainMigration).Scan(&chained); err != nil {
		return err
	}
	if chained == 0 {
		return storage.ErrAuditSchema
	}
	return nil
}

// Path is the database file's path.
func (f *AuditFile) Path() string { return f.path }

// VerifyAudit is DB.VerifyAudit on the file.
func (f *AuditFile) VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	c, err := checkChain(ctx, f.read, storage.AuditStart, 0, anchor)
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("verify the audit log: %w", err)
	}
	return c, nil
}

// AuditRows is DB.AuditRows on the file.
func (f *AuditFile) AuditRows(ctx context.Context, fn func(storage.AuditEntry) error) error {
	return auditRows(ctx, f.read, fn)
}

// Close closes the file's connections.
func (f *AuditFile) Close() error { return f.read.Close() }

// openReadOnly opens the database file at path for reading only, as it is: no
// migration, no write. mode=ro: SQLite opens the file read-only and never creates it.
// No journal_mode and no txlock in the DSN: setting WAL, or BEGIN IMMEDIATE, would be a
// write. Not immutable: that reads the database file alone, without the WAL, and would
// miss (or tear) what serve commits meanwhile; except on read-only media (an auditor's
// copy on a stick mounted read-only, a snapshot), where SQLite cannot make the -shm a
// WAL database is read through, and where nothing commits: with no WAL holding
// anything beside the file, the file alone is the database.
func openReadOnly(path string, busyTimeout time.Duration) *sql.DB {
	params := url.Values{}
	params.Set("mode", "ro")
	if readOnlyMedia(path) {
		params.Set("immutable", "1")
	}
	params.Set("_query_only", "1")
	params.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	dsn := fileURI(path) + "?" + params.Encode()
	return sql.OpenDB(newConnector(dsn, nil))
}

// readOnlyMedia reports whether the database at path lies where this process can write
// nothing (its directory is on a read-only mount, made immutable, or another user's) and
// is closed: no -shm beside it, which every process with the database open keeps, and
// no WAL holding anything. A live database in a directory this user cannot write (serve
// running as another user) has a -shm, and is read through it as usual.
func readOnlyMedia(path string) bool {
	if syscall.Access(filepath.Dir(path), 2 /* W_OK */) == nil {
		return false
	}
	if _, err := os.Stat(path + "-shm"); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(path + "-wal")
	return errors.Is(err, os.ErrNotExist) || err == nil && fi.Size() == 0
}
