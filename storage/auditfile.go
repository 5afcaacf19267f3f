package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// ErrAuditSchema means a database's schema predates the audit log's hash chain: its
// rows have no hashes to check until serve (which migrates) has opened it.
var ErrAuditSchema = errors.New("the database's schema predates the audit log's hash chain")

// ErrNotHookdedup means the file is an SQLite database that hookdedup never set up.
var ErrNotHookdedup = errors.New("not a hookdedup database (it has no migrations table)")

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
// (serve) is waited for up to busyTimeout. Returns ErrNoDatabase when there is no
// file at path, ErrNotHookdedup for an SQLite file hookdedup did not make, and
// ErrAuditSchema for a database whose schema predates the audit chain.
func OpenAuditFile(ctx context.Context, path string, busyTimeout time.Duration) (*AuditFile, error) {
	if missing(path) {
		return nil, fmt.Errorf("open database %s: %w", path, ErrNoDatabase)
	}
	if busyTimeout <= 0 {
		busyTimeout = 5 * time.Second
	}
	// mode=ro: SQLite opens the file read-only and never creates it. No journal_mode
	// and no txlock in the DSN: setting WAL, or BEGIN IMMEDIATE, would be a write.
	// Not immutable: that reads the database file alone, without the WAL, and would
	// miss (or tear) what serve commits meanwhile.
	params := url.Values{}
	params.Set("mode", "ro")
	params.Set("_query_only", "1")
	params.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
	read := sql.OpenDB(newConnector(dsn, nil))
	f := &AuditFile{path: path, read: read}
	if err := f.checkSchema(ctx); err != nil {
		read.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
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
		return ErrNotHookdedup
	}
	var chained int
	if err := f.read.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE name = ?`, auditChainMigration).Scan(&chained); err != nil {
		return err
	}
	if chained == 0 {
		return ErrAuditSchema
	}
	return nil
}

// Path is the database file's path.
func (f *AuditFile) Path() string { return f.path }

// VerifyAudit is DB.VerifyAudit on the file.
func (f *AuditFile) VerifyAudit(ctx context.Context, anchor AuditAnchor) (AuditCheck, error) {
	c, err := checkChain(ctx, f.read, chainPos{Hash: AuditGenesis}, 0, anchor)
	if err != nil {
		return AuditCheck{}, fmt.Errorf("verify the audit log: %w", err)
	}
	return c, nil
}

// AuditRows is DB.AuditRows on the file.
func (f *AuditFile) AuditRows(ctx context.Context, fn func(AuditEntry) error) error {
	return auditRows(ctx, f.read, fn)
}

// Close closes the file's connections.
func (f *AuditFile) Close() error { return f.read.Close() }
