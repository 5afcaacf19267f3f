package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/hookdedup/hookdedup/storage"
)

// Snapshot is a database file opened read-only and held in one read transaction, so
// that every table read from it is of one moment: a copy into another engine
// (storage.TableSource). It never writes the file.
type Snapshot struct {
	conn *sql.DB
	tx   *sql.Tx
}

var _ storage.TableSource = (*Snapshot)(nil)

// OpenSnapshot opens the database at path read-only and begins its snapshot. Returns
// an error wrapping storage.ErrNoDatabase when there is no file at path.
func OpenSnapshot(ctx context.Context, path string) (*Snapshot, error) {
	if missing(path) {
		return nil, fmt.Errorf("open database %s: %w", path, storage.ErrNoDatabase)
	}
	params := url.Values{}
	params.Set("mode", "ro")
	params.Set("_query_only", "1")
	params.Set("_busy_timeout", "5000")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
	conn := sql.OpenDB(newConnector(dsn, nil))
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
	return &Snapshot{conn: conn, tx: tx}, nil
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

// Close ends the snapshot and closes the file.
func (s *Snapshot) Close() error {
	s.tx.Rollback()
	return s.conn.Close()
}
