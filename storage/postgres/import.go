package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// copiedTables are the tables Import copies, parents before the tables that refer to
// them: every table of the schema but those of leftTables (a test checks that none is
// missing).
var copiedTables = []string{
	"users", "tokens", "sessions", "devices", "settings", "login_failures", "audit_log",
	"claims", "deliveries", "attempts", "rejection_counts",
	"delivery_stats", "delivery_stats_mark",
	"suspects", "business_keys", "correlation_keys", "key_traces",
	"ledger_days", "ledger_totals", "ledger_mark",
	"bulk_actions", "bulk_action_keys",
	"alerts", "alert_notifications", "reprocessed",
}

// leftTables are the tables of the schema that Import leaves as Open made them: the
// migrations applied, the roll-ups' fences, which only this engine has and which the
// first roll-up sets, and the suspects' running totals, left empty with their mark at
// 0: every suspect copied is read as after the mark, so the counts are the source's
// from the start, and this engine's roll-up folds them in its own way (fence and all);
// and the running dispatchers, which the copy's serve records anew as it starts.
var leftTables = []string{"migrations", "rollup_fences", "suspect_totals", "suspect_totals_mark", "dispatchers"}

// sourceColumn is the name a column has in the SQLite engine's schema, where it differs.
func sourceColumn(table, column string) string {
	if column == "id" && (table == "delivery_stats_mark" || table == "ledger_mark") {
		return "only" // a reserved word in PostgreSQL
	}
	return column
}

// copyChunk and copyChunkBytes bound what goes to PostgreSQL in one COPY, and so what
// a copy holds in memory at once: so many rows, or so many bytes of their text and
// bodies, whichever comes first. Rows alone would not do: five thousand deliveries of a
// megabyte each are five gigabytes.
const (
	copyChunk      = 5000
	copyChunkBytes = 8 << 20
)

// Import copies src, a database of another engine read in one snapshot, into db, which
// must be empty (as Open leaves a new database), in one transaction: either everything
// is copied or nothing is. It then moves every id sequence past the highest id copied,
// so that new rows never reuse one, counts each table on both sides, and reports them.
// A count that differs is an error, and nothing is committed.
func (db *DB) Import(ctx context.Context, src storage.TableSource, progress func(table string, rows int64)) ([]storage.TableCopy, error) {
	var out []storage.TableCopy
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		out = out[:0]
		for _, t := range copiedTables {
			var has bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{t}.Sanitize()+`)`).Scan(&has); err != nil {
				return fmt.Errorf("check that %s is empty: %w", t, err)
			}
			if has {
				return fmt.Errorf("the database is not empty (table %s has rows): copy into a new database", t)
			}
		}
		for _, t := range copiedTables {
			c, err := copyTable(ctx, tx, src, t)
			if err != nil {
				return err
			}
			if progress != nil {
				progress(t, c.Copied)
			}
			out = append(out, c)
		}
		if err := resetSequences(ctx, tx, src); err != nil {
			return err
		}
		// Last, as close to the commit as can be.
		return src.Unchanged(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	return out, nil
}

// copyTable copies one table, checks its count against the source's, and says so.
func copyTable(ctx context.Context, tx pgx.Tx, src storage.TableSource, table string) (storage.TableCopy, error) {
	rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return storage.TableCopy{}, fmt.Errorf("columns of %s: %w", table, err)
	}
	var cols, types, srcCols []string
	for rows.Next() {
		var c, t string
		if err := rows.Scan(&c, &t); err != nil {
			return storage.TableCopy{}, fmt.Errorf("columns of %s: %w", table, err)
		}
		cols, types, srcCols = append(cols, c), append(types, t), append(srcCols, sourceColumn(table, c))
	}
	if err := rows.Err(); err != nil {
		return storage.TableCopy{}, fmt.Errorf("columns of %s: %w", table, err)
	}
	c := storage.TableCopy{Table: table}
	if c.Source, err = src.CountRows(ctx, table); err != nil {
		return c, err
	}
	// The audit log's text is copied as it is or not at all: its rows are hashed as
	// they were written, and a text escaped here would break the chain at that row.
	escape := table != "audit_log"
	chunk := make([][]any, 0, copyChunk)
	var chunkBytes int
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(chunk))
		if err != nil {
			return fmt.Errorf("copy %s: %w", table, err)
		}
		c.Copied += n
		clear(chunk) // the rows sent, not held on to by the array beyond its length
		chunk, chunkBytes = chunk[:0], 0
		return nil
	}
	err = src.ReadTable(ctx, table, srcCols, func(row []any) error {
		vals := make([]any, len(row))
		for i, v := range row {
			cv, err := convert(v, types[i], escape)
			if err != nil {
				return fmt.Errorf("copy %s: the row whose %s is %v: column %s: %w", table, cols[0], row[0], cols[i], err)
			}
			vals[i] = cv
			chunkBytes += valueBytes(cv)
		}
		chunk = append(chunk, vals)
		if len(chunk) == copyChunk || chunkBytes >= copyChunkBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return c, err
	}
	if c.Copied != c.Source {
		return c, fmt.Errorf("copy %s: %d rows copied of the source's %d", table, c.Copied, c.Source)
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		return c, fmt.Errorf("count %s: %w", table, err)
	}
	if n != c.Source {
		return c, fmt.Errorf("copy %s: %d rows in PostgreSQL after the copy, the source has %d", table, n, c.Source)
	}
	return c, nil
}

// valueBytes is about how much memory v, a converted value, holds.
func valueBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 16
	case []byte:
		return len(x) + 24
	}
	return 16
}

// errAuditText is audit text that PostgreSQL cannot store.
var errAuditText = errors.New("the text holds a NUL byte or bytes that are not UTF-8, which PostgreSQL cannot store, " +
	"and an audit row cannot be changed without breaking the audit chain")

// convert turns a value as the SQLite engine stores it into one for a column of
// PostgreSQL type typ: 0/1 into booleans, text read as bytes into text, and so on.
// SQLite's text may hold what PostgreSQL's cannot (a NUL byte that a payload spelled
// \u0000, bytes that are not UTF-8, from outside): with escape, such a text is stored
// as this engine's intake stores it (textSafe), so that one odd delivery, which anyone
// may have sent, does not stop the whole copy; without, it is an error.
func convert(v any, typ string, escape bool) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "boolean":
		switch x := v.(type) {
		case int64:
			return x != 0, nil
		case bool:
			return x, nil
		}
	case "text":
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		case int64, float64:
			s = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("%T is not text", v)
		}
		if textOK(s) {
			return s, nil
		}
		if !escape {
			return nil, errAuditText
		}
		return textSafe(s), nil
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "bigint", "integer", "smallint":
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == float64(int64(x)) {
				return int64(x), nil
			}
		}
	case "double precision":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("%T %v does not fit a column of type %s", v, v, typ)
}

// resetSequences moves each id sequence past the highest id copied: the identities of
// the tables, past the highest id the source ever gave too where it keeps one (the
// ids of its AUTOINCREMENT tables, users and tokens: a token removed with its user
// while it had the highest id is named by its id in the audit log copied with it),
// and delivery_ids past both the highest delivery and the highest id the source ever
// issued (a claim may name a delivery swept since).
func resetSequences(ctx context.Context, tx pgx.Tx, src storage.TableSource) error {
	given := map[string]int64{}
	err := src.ReadTable(ctx, "sqlite_sequence", []string{"name", "seq"}, func(row []any) error {
		name, _ := row[0].(string)
		if seq, ok := row[1].(int64); ok && name != "" {
			given[name] = max(given[name], seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT table_name FROM information_schema.columns
WHERE table_schema = current_schema() AND column_name = 'id' AND is_identity = 'YES'`)
	if err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	for _, t := range tables {
		name := pgx.Identifier{t}.Sanitize()
		if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), GREATEST(max(id), $2)) FROM `+name+`
			HAVING max(id) IS NOT NULL OR $2 > 0`, name, given[t]); err != nil {
			return fmt.Errorf("move the ids of %s past the copied ones: %w", t, err)
		}
	}
	var issued int64
	err = src.ReadTable(ctx, "delivery_seq", []string{"last"}, func(row []any) error {
		if n, ok := row[0].(int64); ok {
			issued = max(issued, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT setval('delivery_ids', GREATEST($1::bigint, (SELECT coalesce(max(id), 0) FROM deliveries), 1))`,
		issued); err != nil {
		return fmt.Errorf("move the delivery ids past the copied ones: %w", err)
	}
	return nil
}
