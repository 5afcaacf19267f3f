package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// sqliteWithEverything is a SQLite database with rows in every table a copy moves:
// deliveries of each outcome, a batch, a suspect, users, a token, a session, settings,
// audit rows, an alert with its notifications, rejection counts, an attempt, a bulk
// preview, a reprocess counted for its operator, and the roll-ups of statistics and the
// ledger.
func sqliteWithEverything(t *testing.T) (*sqlite.DB, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	opt := storage.ClaimOptions{TTL: time.Hour, Dispatch: true, BusinessWindow: time.Hour}
	rec := func(key, hash, business, amount string) *storage.Delivery {
		d := &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: hash,
			Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json", Headers: map[string][]string{"X-A": {"1"}},
			BusinessKey: business, Property: "p1", Booking: "b1", Amount: amount, Currency: "EUR"}
		return storagetest.Record(t, db, d, opt)
	}
	first := rec("evt_1", "h1", "B", "80.00")
	rec("evt_1", "h1", "B", "80.00") // a duplicate, body by reference
	rec("evt_1", "h2", "B", "90.00") // a mismatching duplicate
	rec("evt_2", "h3", "B", "80.00") // a suspected double of evt_1
	storagetest.Record(t, db, &storage.Delivery{Source: "ota", Status: 401, Outcome: storage.Rejected, Error: "bad signature"}, opt)
	storagetest.Record(t, db, &storage.Delivery{Source: "psp", Status: 200, Key: "r1", KeyMethod: "event_id", PayloadHash: "c",
		Body: []byte(`{}`), Correlations: []storage.CorrelationKey{{Rule: "refunds", Hash: "abc", Window: time.Hour}}}, opt)
	// A key whose claim expired and was swept leaves its trace.
	storagetest.Record(t, db, &storage.Delivery{Source: "psp", Status: 200, Key: "gone", KeyMethod: "event_id", PayloadHash: "g",
		Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Millisecond})
	if n, err := db.SweepExpired(ctx, db.Now().Add(time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	batch := []*storage.Delivery{
		{Source: "cm", Status: 200, Key: "i1", KeyMethod: "event_id", PayloadHash: "x1", Body: []byte(`{"i":1}`),
			BatchEnvelope: `{"live":"false"}`},
		{Source: "cm", Status: 200, Key: "i2", KeyMethod: "event_id", PayloadHash: "x2", Body: []byte(`{"i":2}`),
			BatchEnvelope: `{"live":"false"}`},
	}
	if err := db.RecordBatch(ctx, batch, opt); err != nil {
		t.Fatal(err)
	}
	admin := storagetest.CreateUser(t, db, "ann", storage.RoleAdmin, "a-long-enough-password")
	storagetest.CreateUser(t, db, "bob", storage.RoleOperator, "a-long-enough-password")
	if _, _, err := db.CreateToken(ctx, "ann", "ci", "ann"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateSession(ctx, admin, db.Now()); err != nil {
		t.Fatal(err)
	}
	if err := db.RememberDevice(ctx, "ann", "a-browser", db.Now(), db.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SettingOrInit(ctx, "secret.ota", func() (string, error) { return "whsec_x", nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "cm", Key: "i1", Actor: "ann", Reason: "test", StuckBefore: db.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.LeaseDue(ctx, db.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("lease: %d jobs, %v", len(jobs), err)
	}
	if _, err := db.FinishAttempt(ctx, jobs[0], storage.Attempt{Source: jobs[0].Source, Key: jobs[0].Key, Delivery: jobs[0].Delivery,
		StartedAt: db.Now(), Status: 200}, storage.AttemptResult{Done: true}); err != nil {
		t.Fatal(err)
	}
	// A reprocess under a threshold is counted for its operator, and keeps its window.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ann", Reason: "test", Reprocess: true,
		StuckBefore: db.Now().Add(time.Hour), Thresholds: storage.ApprovalThresholds{"EUR": "1000.00"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota", Channels: []string{"ops", "pager"}}, db.Now()); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRejectionCounts(ctx, []storage.RejectionCount{{Source: "nope", Status: 404, Minute: db.Now(), Rejections: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "outage", Actor: "ann", StuckBefore: db.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RollupStats(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RollupLedger(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if first.ID == 0 {
		t.Fatal("nothing recorded")
	}
	return db, path
}

// TestImport copies a SQLite database with rows in every table into PostgreSQL: every
// row arrives, with its values as the SQLite engine stored them, and new rows take ids
// past the copied ones.
func TestImport(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	want, err := lite.Delivery(ctx, 2) // a duplicate whose body is its first delivery's
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	copied, err := db.Import(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url)
	for _, c := range copied {
		if c.Copied != c.Source {
			t.Errorf("%s: %d copied of %d", c.Table, c.Copied, c.Source)
		}
		// Every table the fixture fills must have arrived with rows: a table the copy
		// skipped, or one the fixture left empty, would hide a column that does not
		// convert.
		if c.Copied == 0 && c.Table != "login_failures" {
			t.Errorf("%s: no rows copied", c.Table)
		}
	}
	got, err := db.Delivery(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delivery 2 in PostgreSQL:\n%+v\nin SQLite:\n%+v", got, want)
	}
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_new", KeyMethod: "event_id", PayloadHash: "n", Body: []byte(`{}`)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var maxCopied int64
	for _, c := range copied {
		if c.Table == "deliveries" {
			maxCopied = c.Copied
		}
	}
	if d.ID <= maxCopied {
		t.Errorf("a new delivery took id %d, within the copied ones (%d)", d.ID, maxCopied)
	}
	// Every table of the schema is either copied or named as not copied.
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range copied {
		names = append(names, c.Table)
	}
	for _, tb := range tables {
		if !slices.Contains(names, tb) && !slices.Contains(postgres.LeftTables, tb) {
			t.Errorf("table %s is neither copied nor named as left out", tb)
		}
	}
}

// TestImport_BatchEnvelope: what a batched request held besides its events, stored
// with its first item as intake stores it, arrives in PostgreSQL and is read with each
// of its items, byte for byte (its non-ASCII text, its numbers as sent), and a copied
// item still owed downstream is leased with it, so that the replicas hand it on as the
// SQLite setup would have.
func TestImport_BatchEnvelope(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	lite := storagetest.OpenPath(t, path, sqlite.Options{})
	const envelope = `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac87008b2f90",` +
		`"Name":"Hôtel Zürich 東京","Big":12345678901234567890}`
	b := []*storage.Delivery{
		{Source: "mews", Status: 200, Key: "e0", KeyMethod: "derived", PayloadHash: "x0", BatchEnvelope: envelope,
			Body: []byte(`{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"0"}}`)},
		{Source: "mews", Status: 200, Key: "e1", KeyMethod: "derived", PayloadHash: "x1",
			Body: []byte(`{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"1"}}`)},
	}
	if err := lite.RecordBatch(ctx, b, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	alone := storagetest.Record(t, lite, &storage.Delivery{Source: "ota", Status: 200, Key: "evt_1", KeyMethod: "event_id",
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, _, _, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range b {
		got, err := db.Delivery(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.BatchEnvelope != envelope {
			t.Errorf("item %d in PostgreSQL: envelope %q, want %q", i, got.BatchEnvelope, envelope)
		}
	}
	if got, err := db.Delivery(ctx, alone.ID); err != nil || got.BatchEnvelope != "" {
		t.Errorf("a delivery that came alone, in PostgreSQL: envelope %q, %v; want none", got.BatchEnvelope, err)
	}
	jobs, err := db.LeaseDue(ctx, db.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("lease after the copy: %d jobs, %v; want the two items", len(jobs), err)
	}
	for _, j := range jobs {
		if j.BatchEnvelope != envelope {
			t.Errorf("job of %s after the copy: envelope %q, want %q", j.Key, j.BatchEnvelope, envelope)
		}
	}
}

// TestImport_RefusesNonEmpty: a copy into a database that holds anything is refused and
// writes nothing.
func TestImport_RefusesNonEmpty(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	lite.Close()
	src, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	db := open(t, postgrestest.NewDatabase(t))
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_x", KeyMethod: "event_id", PayloadHash: "n", Body: []byte(`{}`)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Import(ctx, src, nil)
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("import into a database with a delivery: %v", err)
	}
	if _, err := db.Delivery(ctx, 2); err == nil {
		t.Error("the refused copy wrote delivery 2")
	}
}

// fileMigrations lists the migrations the SQLite file at path records, read as it is.
func fileMigrations(t *testing.T, path string) string {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var names string
	if err := raw.QueryRow(`SELECT group_concat(name, ' ') FROM (SELECT name FROM migrations ORDER BY name)`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestImport_OlderFileLeftAsItIs: a file an earlier version made is copied through an
// upgraded copy of it, which goes when the copy is done; the file keeps its schema, so
// that the earlier version can run on it again if the move is called off.
func TestImport_OlderFileLeftAsItIs(t *testing.T) {
	lite, path := sqliteWithEverything(t)
	lite.Close()
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM migrations WHERE name = 'migrations/0026_dispatch_lease.sql'`,
		`ALTER TABLE claims DROP COLUMN leased_until`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	before := fileMigrations(t, path)
	if strings.Contains(before, "0026") {
		t.Fatal("the file was not made older")
	}
	files := func() []string {
		t.Helper()
		des, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	src, err := sqlite.OpenSnapshot(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, postgrestest.NewDatabase(t))
	if _, err := db.Import(t.Context(), src, nil); err != nil {
		t.Fatal(err)
	}
	if len(files()) < 2 {
		t.Errorf("files beside the database during the copy: %v; want the upgraded copy among them", files())
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files() {
		if strings.HasSuffix(f, ".tmp") || strings.Contains(f, ".tmp-") {
			t.Errorf("%s is left beside the database after the copy", f)
		}
	}
	if c, err := db.Claim(t.Context(), "cm", "i2"); err != nil || c.Key != "i2" {
		t.Fatalf("the copy of an older file: claim %+v, %v", c, err)
	}
	if after := fileMigrations(t, path); after != before {
		t.Errorf("the file records %s after the copy; want it as it was, %s", after, before)
	}
}

// TestImport_RefusedWhenTheFileIsWritten: a write to the file after its snapshot began
// (a serve started during the copy, acknowledging deliveries) would be missing from
// PostgreSQL: the copy commits nothing and says why.
func TestImport_RefusedWhenTheFileIsWritten(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	lite.Close()
	src, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO settings (name, value) VALUES ('late', 'x')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db := open(t, postgrestest.NewDatabase(t))
	_, err = db.Import(ctx, src, nil)
	if err == nil || !strings.Contains(err.Error(), "during the copy") {
		t.Fatalf("copy of a file written during it: %v; want a refusal", err)
	}
	if _, err := db.Claim(ctx, "cm", "i2"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the refused copy committed claims: %v", err)
	}
}
