package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // the test's own connection to the source file

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// importFile copies the SQLite database at path into a new PostgreSQL database and
// returns it, its URL, and what the copy reported.
func importFile(t *testing.T, path string) (*postgres.DB, string, []storage.TableCopy, error) {
	t.Helper()
	src, err := sqlite.OpenSnapshot(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	copied, err := db.Import(t.Context(), src, nil)
	return db, url, copied, err
}

// pgColumns are table's columns in PostgreSQL, in their order.
func pgColumns(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT column_name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// comparable is a value of either engine in one form: flags and integers as int64,
// text and bytes as a quoted string, NULL as "NULL".
func comparable(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "1"
		}
		return "0"
	case int16, int32, int64:
		return fmt.Sprint(x)
	case float64:
		return fmt.Sprint(x)
	case string:
		return fmt.Sprintf("%q", x)
	case []byte:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

// TestImport_EveryColumn: every value of every column of every table arrives in
// PostgreSQL as the SQLite engine stored it (flags, NULLs, bodies, references,
// headers, hashes), and the audit chain copied verifies.
func TestImport_EveryColumn(t *testing.T) {
	lite, path := sqliteWithEverything(t)
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, url, copied, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := sqlite.OpenSnapshot(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	conn := postgrestest.Connect(t, url)
	for _, c := range copied {
		cols := pgColumns(t, conn, c.Table)
		srcCols := slices.Clone(cols)
		if c.Table == "delivery_stats_mark" || c.Table == "ledger_mark" {
			srcCols[0] = "only"
		}
		var want []string
		err := src.ReadTable(t.Context(), c.Table, srcCols, func(row []any) error {
			vals := make([]string, len(row))
			for i, v := range row {
				vals[i] = comparable(v)
			}
			want = append(want, strings.Join(vals, " | "))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		quoted := make([]string, len(cols))
		for i, col := range cols {
			quoted[i] = pgx.Identifier{col}.Sanitize()
		}
		rows, err := conn.Query(t.Context(), `SELECT `+strings.Join(quoted, ", ")+` FROM `+pgx.Identifier{c.Table}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			row, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]string, len(row))
			for i, v := range row {
				vals[i] = comparable(v)
			}
			got = append(got, strings.Join(vals, " | "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s (%s):\nin PostgreSQL:\n  %s\nin SQLite:\n  %s", c.Table, strings.Join(cols, ", "),
				strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	check, err := db.VerifyAudit(t.Context(), storage.AuditAnchor{})
	if err != nil || check.Break != nil || check.Rows == 0 {
		t.Errorf("audit verify on the copy: %+v, %v", check, err)
	}
}

// TestImport_NewRowsAfterCopied: after a copy, every kind of row that takes an id of
// its own (users, tokens, alerts and their notifications, bulk actions, suspects,
// attempts, audit rows) is added with an id past the copied ones, and the audit chain
// goes on from the copied rows.
func TestImport_NewRowsAfterCopied(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, url, _, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url)
	maxID := func(table string) int64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := map[string]int64{}
	for _, tb := range []string{"users", "tokens", "alerts", "alert_notifications", "bulk_actions", "suspects", "audit_log", "claims", "attempts"} {
		before[tb] = maxID(tb)
		if before[tb] == 0 {
			t.Fatalf("the fixture copied no %s", tb)
		}
	}
	storagetestCreateUser(t, db, "carol")
	if _, _, err := db.CreateToken(ctx, "carol", "deploy", "ann"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "late", Kind: "downstream_failing", Subject: "psp", Channels: []string{"ops"}}, db.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Source: "psp"},
		Reason: "again", Actor: "ann", StuckBefore: db.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	opt := storage.ClaimOptions{TTL: time.Hour, Dispatch: true, BusinessWindow: time.Hour}
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_9", KeyMethod: "event_id", PayloadHash: "h9",
		Body: []byte(`{"id":"evt_9"}`), BusinessKey: "B", Property: "p1", Booking: "b1", Amount: "80.00", Currency: "EUR"}
	if err := db.Record(ctx, d, opt); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.LeaseDue(ctx, db.Now().Add(time.Minute), time.Minute, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
			StartedAt: db.Now(), Status: 200}, storage.AttemptResult{Done: true}); err != nil {
			t.Fatal(err)
		}
	}
	for tb, was := range before {
		if now := maxID(tb); now <= was {
			t.Errorf("%s: no row added past the copied ones (highest id %d, was %d)", tb, now, was)
		}
	}
	check, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || check.Break != nil || check.LastID != maxID("audit_log") {
		t.Errorf("audit verify after new rows: %+v, %v", check, err)
	}
}

// storagetestCreateUser adds a viewer named name to db.
func storagetestCreateUser(t *testing.T, db *postgres.DB, name string) {
	t.Helper()
	if _, err := db.CreateUser(t.Context(), storage.User{Name: name, Role: storage.RoleViewer,
		PasswordHash: "$2a$04$abcdefghijklmnopqrstuuKq1J3Pq9c8m5E7aW0yY8rY6z9bX4gK2"}, "ann"); err != nil {
		t.Fatal(err)
	}
}

// rawSQLite is a connection of the test's own to the SQLite file at path, with no
// foreign keys enforced, to store what the engine's own code would refuse.
func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=off")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestImport_TextPostgreSQLCannotHold: a SQLite file whose text holds what
// PostgreSQL's text cannot (a NUL byte that a payload spelled \u0000, bytes that are
// not UTF-8, a NUL in a name asked for in a URL) is copied all the same, each such
// text stored as the PostgreSQL engine's intake stores it: not a copy that fails on
// one delivery that anyone could have sent.
func TestImport_TextPostgreSQLCannotHold(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	opt := storage.ClaimOptions{TTL: time.Hour}
	odd := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_odd", KeyMethod: "event_id", PayloadHash: "o",
		Body: []byte(`{"booking":"b\u0000"}`), Booking: "b\x00", Property: "p\xff", RemoteAddr: "10.0.0.1"}
	if err := lite.Record(ctx, odd, opt); err != nil {
		t.Fatal(err)
	}
	// A key with a NUL byte: the receiver refuses such an event id now, an older
	// build's file may hold one. Its claim and deliveries keep one spelling of it.
	nulKey := &storage.Delivery{Source: "ota", Status: 200, Key: "evt\x00nul", KeyMethod: "event_id", PayloadHash: "n",
		Body: []byte(`{}`)}
	if err := lite.Record(ctx, nulKey, opt); err != nil {
		t.Fatal(err)
	}
	rejected := &storage.Delivery{Source: "no\x00such", Status: 404, Outcome: storage.Rejected, Error: "unknown source \"no\x00such\""}
	if err := lite.Record(ctx, rejected, opt); err != nil {
		t.Fatal(err)
	}
	if err := lite.AddRejectionCounts(ctx, []storage.RejectionCount{{Source: "x\x00y", Status: 404, Minute: lite.Now(), Rejections: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, _, copied, err := importFile(t, path)
	if err != nil {
		t.Fatalf("copy of a file with a NUL byte and invalid UTF-8 in its text: %v", err)
	}
	if len(copied) == 0 {
		t.Fatal("nothing copied")
	}
	got, err := db.Delivery(ctx, odd.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Booking != `b\x00` || got.Property != `p\xff` || string(got.Body) != string(odd.Body) {
		t.Errorf("the odd delivery in PostgreSQL: booking %q, property %q, body %q", got.Booking, got.Property, got.Body)
	}
	if c, err := db.Claim(ctx, "ota", `evt\x00nul`); err != nil || c.FirstDelivery != nulKey.ID {
		t.Errorf("the claim of the key with a NUL byte, by its escaped spelling: %+v, %v", c, err)
	}
	if got, err := db.Delivery(ctx, rejected.ID); err != nil || got.Source != `no\x00such` {
		t.Errorf("the rejected delivery in PostgreSQL: %+v, %v", got, err)
	}
}

// TestImport_FailureCommitsNothing: a copy that fails part of the way (a row that
// PostgreSQL refuses, in a table copied after others) leaves the database empty, its
// sequences untouched, and a second copy can then be made into it.
func TestImport_FailureCommitsNothing(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawSQLite(t, path)
	// A notification of an alert that is not there: SQLite, its foreign keys off, took it.
	if _, err := raw.Exec(`INSERT INTO alert_notifications (alert, channel, event, created_at) VALUES (999, 'ops', 'opened', 1)`); err != nil {
		t.Fatal(err)
	}
	db, url, _, err := importFile(t, path)
	if err == nil || !strings.Contains(err.Error(), "alert_notifications") {
		t.Fatalf("copy with an orphan notification: %v", err)
	}
	conn := postgrestest.Connect(t, url)
	for _, tb := range []string{"users", "deliveries", "claims", "audit_log", "alerts", "alert_notifications"} {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+tb).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s after the failed copy: %d rows, %v", tb, n, err)
		}
	}
	if _, err := raw.Exec(`DELETE FROM alert_notifications WHERE alert = 999`); err != nil {
		t.Fatal(err)
	}
	src, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := db.Import(ctx, src, nil); err != nil {
		t.Fatalf("the copy again, once the file is fixed: %v", err)
	}
}

// TestImport_AuditTextRefused: an audit row whose text PostgreSQL cannot hold (a NUL,
// as an earlier version stored one) is not escaped, which would break the copied chain
// at that row, but refused by name, and nothing is committed.
func TestImport_AuditTextRefused(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	// Past the leases sqliteWithEverything took, so that i2 has no attempt under way.
	later := lite.Now().Add(2 * time.Minute)
	lite.Now = func() time.Time { return later }
	if _, err := lite.ReleaseKey(ctx, storage.Release{Source: "cm", Key: "i2", Actor: "ann", Reason: "ab",
		StuckBefore: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rawSQLite(t, path).Exec(`UPDATE audit_log SET reason = 'a' || char(0) || 'b' WHERE reason = 'ab'`); err != nil {
		t.Fatal(err)
	}
	_, url, _, err := importFile(t, path)
	if err == nil || !strings.Contains(err.Error(), "audit_log") || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("copy of an audit row with a NUL byte: %v", err)
	}
	var n int64
	if err := postgrestest.Connect(t, url).QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil || n != 0 {
		t.Errorf("users after the refused copy: %d, %v", n, err)
	}
}

// peakSource is a TableSource that measures, after each row of deliveries it hands
// on, how much of the heap is live: what a copy holds at once.
type peakSource struct {
	storage.TableSource
	peak uint64
}

func (s *peakSource) ReadTable(ctx context.Context, table string, columns []string, fn func(row []any) error) error {
	return s.TableSource.ReadTable(ctx, table, columns, func(row []any) error {
		if err := fn(row); err != nil {
			return err
		}
		if table == "deliveries" {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			s.peak = max(s.peak, m.HeapAlloc)
		}
		return nil
	})
}

// TestImport_MemoryBounded: a copy of large deliveries holds a bounded part of them in
// memory at once, not as many rows as a COPY takes whatever their size.
func TestImport_MemoryBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "big.db")
	lite := storagetest.OpenPath(t, path, sqlite.Options{})
	const n, size = 48, 512 << 10 // 24 MiB of bodies
	body := make([]byte, size)
	for i := range n {
		for j := range body {
			body[j] = byte('a' + (i+j)%26)
		}
		d := &storage.Delivery{Source: "ota", Status: 200, Key: fmt.Sprintf("evt_%d", i), KeyMethod: "event_id",
			PayloadHash: fmt.Sprint(i), Body: body}
		if err := lite.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	src := &peakSource{TableSource: snap}
	if _, err := db.Import(ctx, src, nil); err != nil {
		t.Fatal(err)
	}
	grew := int64(src.peak) - int64(m.HeapAlloc)
	t.Logf("held at most %d KiB at once", grew>>10)
	if grew > 16<<20 {
		t.Errorf("the copy held %d MiB at once of %d MiB of bodies", grew>>20, n*size>>20)
	}
	var stored int64
	if err := postgrestest.Connect(t, url).QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE length(body) = $1`, size).Scan(&stored); err != nil || stored != n {
		t.Errorf("%d deliveries with their whole body copied, want %d (%v)", stored, n, err)
	}
}
