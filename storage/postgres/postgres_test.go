package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

func TestMain(m *testing.M) { postgrestest.Main(m, nil) }

// open opens the database at url and closes it when the test ends.
func open(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func migrationsApplied(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestOpen_Migrates: Open makes the claims and deliveries tables in an empty database
// and records its migrations; opening again changes nothing.
func TestOpen_Migrates(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	if err := db.Ping(t.Context()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	conn := postgrestest.Connect(t, url)
	for _, table := range []string{"claims", "deliveries"} {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
	}
	first := migrationsApplied(t, conn)
	if len(first) == 0 {
		t.Fatal("no migration recorded")
	}
	open(t, url)
	if again := migrationsApplied(t, conn); strings.Join(again, ",") != strings.Join(first, ",") {
		t.Fatalf("after a second Open: %v, want %v", again, first)
	}
}

// TestOpen_RefusesAnotherApplicationsTables: a database that holds tables hookdedup did
// not make is refused by name before anything is made in it, rather than left with
// half of hookdedup's schema beside them when a name clashes.
func TestOpen_RefusesAnotherApplicationsTables(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	conn := postgrestest.Connect(t, url)
	// Another tool's migrations table, too, is not hookdedup's.
	if _, err := conn.Exec(t.Context(), `CREATE TABLE users (id int); CREATE TABLE migrations (id int, migration text)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "tables hookdedup did not make (migrations, users)") {
		t.Fatalf("open of a database with other tables: %v; want a refusal naming them", err)
	}
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).
		Scan(&tables); err != nil || tables != 2 {
		t.Errorf("tables after the refusal: %d, %v; want the two that were there", tables, err)
	}
}

// TestOpen_Concurrent: replicas that start together against an empty database all
// open it, and each migration is applied once (a second CREATE TABLE would fail).
func TestOpen_Concurrent(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	dbs := make([]*postgres.DB, replicas)
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			<-start
			dbs[i], errs[i] = postgres.Open(t.Context(), url, postgres.Options{MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
			continue
		}
		dbs[i].Close()
	}
	conn := postgrestest.Connect(t, url)
	names := migrationsApplied(t, conn)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("migration %s recorded twice", n)
		}
		seen[n] = true
	}
}

// TestOpen_RefusesNewerSchema: a database that a newer build migrated is refused, with
// the migration this build does not know named.
func TestOpen_RefusesNewerSchema(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	open(t, url)
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(t.Context(), `INSERT INTO migrations (name, applied_at) VALUES ('migrations/9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "9999_future.sql") {
		t.Errorf("open: err = %v, want a refusal naming 9999_future.sql", err)
	}
}

// TestOpen_NoMigrate: a verifier's open never changes the schema, and asks of it only
// the audit log's hash chain, as SQLite's OpenAuditFile does: a database that hookdedup
// never set up is refused as none; one that lacks later migrations (serve not upgraded
// yet), or has one this build does not know (the verifier older than the replicas), is
// opened as it is; only one without the chain's migration is refused as predating it.
func TestOpen_NoMigrate(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	if _, err := postgres.Open(t.Context(), url, postgres.Options{NoMigrate: true}); !errors.Is(err, storage.ErrNoDatabase) {
		t.Errorf("an empty database: %v, want ErrNoDatabase", err)
	}
	open(t, url)
	conn := postgrestest.Connect(t, url)
	for _, change := range []struct{ name, sql string }{
		{"OlderSchema", `DELETE FROM migrations WHERE name = (SELECT max(name) FROM migrations)`},
		{"NewerSchema", `INSERT INTO migrations (name, applied_at) VALUES ('migrations/9999_future.sql', 0)`},
	} {
		if _, err := conn.Exec(t.Context(), change.sql); err != nil {
			t.Fatal(err)
		}
		before := migrationsApplied(t, conn)
		db, err := postgres.Open(t.Context(), url, postgres.Options{NoMigrate: true})
		if err != nil {
			t.Fatalf("%s: %v, want the database opened as it is", change.name, err)
		}
		if _, err := db.VerifyAudit(t.Context(), storage.AuditAnchor{}); err != nil {
			t.Errorf("%s: verify the audit log: %v", change.name, err)
		}
		db.Close()
		if after := migrationsApplied(t, conn); !slices.Equal(after, before) {
			t.Errorf("%s: the verifier's open changed the migrations: %v, then %v", change.name, before, after)
		}
	}
	if _, err := conn.Exec(t.Context(), `DELETE FROM migrations WHERE name = 'migrations/0002_everything_else.sql'`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), url, postgres.Options{NoMigrate: true})
	if !errors.Is(err, storage.ErrAuditSchema) || !strings.Contains(err.Error(), "lacks migration 0002_everything_else.sql") {
		t.Errorf("a schema without the chain's migration: %v, want ErrAuditSchema naming the migration", err)
	}
}

// TestOpen_MustExistDoesNotUpgrade: a command's open (MustExist, NoUpgrade) of a
// database an earlier version set up refuses it, naming what it lacks, and migrates
// nothing: that version's replicas may run on it still. serve's open then upgrades it.
func TestOpen_MustExistDoesNotUpgrade(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	open(t, url) // stays open, as an earlier version's replica would
	conn := postgrestest.Connect(t, url)
	for _, q := range []string{`ALTER TABLE bulk_action_keys DROP COLUMN first_delivery`,
		`DELETE FROM migrations WHERE name = 'migrations/0017_bulk_key_first_delivery.sql'`} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := migrationsApplied(t, conn)
	for _, opt := range []postgres.Options{{MustExist: true}, {NoUpgrade: true}} {
		_, err := postgres.Open(t.Context(), url, opt)
		if err == nil || !strings.Contains(err.Error(), "lacks migrations 0017_bulk_key_first_delivery.sql") ||
			!strings.Contains(err.Error(), "serve") {
			t.Errorf("open with %+v of an older schema: %v, want a refusal naming 0017 and serve", opt, err)
		}
		if after := migrationsApplied(t, conn); len(after) != len(before) {
			t.Fatalf("open with %+v migrated: %v, then %v", opt, before, after)
		}
	}
	open(t, url)
	if after := migrationsApplied(t, conn); len(after) != len(before)+1 {
		t.Errorf("serve's open did not upgrade the schema: %v, then %v", before, after)
	}
	db, err := postgres.Open(t.Context(), url, postgres.Options{MustExist: true})
	if err != nil {
		t.Fatalf("a command's open once serve upgraded the schema: %v", err)
	}
	db.Close()

	// user add sets up a database that hookdedup never set up.
	fresh := postgrestest.NewDatabase(t)
	db, err = postgres.Open(t.Context(), fresh, postgres.Options{NoUpgrade: true})
	if err != nil {
		t.Fatalf("open with NoUpgrade of an empty database: %v", err)
	}
	db.Close()
}

// lockedLog is a log that Open's goroutines write while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOpen_MigrationsOutlastTheConnectTimeout: only connecting is bounded by the URL's
// connect_timeout. A migration that takes longer (here it waits for a lock that a
// pg_dump-like reader holds, as an index build on a large table takes long by itself)
// runs to its end, logged every so often with the session that holds it up, and so does
// a replica's wait while another holds the migration lock. Only ctx ends either (the
// process stopped): the migration then rolls back, and the error says so. The report
// comes a second into the wait, while the migration, its first attempt's lock wait
// over, pauses before the next and waits for no lock: it still names the session that
// held it up.
func TestOpen_MigrationsOutlastTheConnectTimeout(t *testing.T) {
	postgres.ReportWaitsEvery(t, time.Second)
	const hold = 2 * time.Second
	const last = "migrations/0022_stats_unsummed.sql"
	url := postgrestest.NewDatabase(t)
	open(t, url).Close()
	limited := url + "&connect_timeout=1"
	conn := postgrestest.Connect(t, url)
	// The database as the previous release left it: without the last migration.
	behind := func(t *testing.T) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN IF EXISTS unsummed;
			DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
			t.Fatal(err)
		}
	}
	// hold takes a lock on a connection of its own, in a transaction that ends after
	// d, and returns that connection's server process.
	holdLock := func(t *testing.T, lock string, d time.Duration) uint32 {
		t.Helper()
		c := postgrestest.Connect(t, url)
		if _, err := c.Exec(t.Context(), `BEGIN; `+lock); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		timer := time.AfterFunc(d, func() {
			defer close(done)
			c.Exec(context.Background(), `COMMIT`)
		})
		t.Cleanup(func() {
			if !timer.Stop() {
				<-done // the COMMIT ran: the connection is closed after it
			}
		})
		return c.PgConn().PID()
	}
	applied := func(t *testing.T) bool {
		return slices.Contains(migrationsApplied(t, conn), last)
	}

	t.Run("SlowMigration", func(t *testing.T) {
		behind(t)
		reader := holdLock(t, `LOCK TABLE delivery_stats IN ACCESS SHARE MODE`, hold)
		var log lockedLog
		start := time.Now()
		db, err := postgres.Open(t.Context(), limited, postgres.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("open gave up after %v, the migration waiting for a lock held %v: %v", took.Round(time.Millisecond), hold, err)
		}
		db.Close()
		if took < hold-100*time.Millisecond || !applied(t) {
			t.Errorf("open took %v, the lock held %v; migration applied: %v", took, hold, applied(t))
		}
		if want := fmt.Sprintf("blocked_by=\"pid %d ", reader); !strings.Contains(log.String(), "applying migration") ||
			!strings.Contains(log.String(), last) || !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say which migration runs and which session (%s…) holds it up:\n%s", want, log.String())
		}
	})

	t.Run("WaitingReplica", func(t *testing.T) {
		holder := holdLock(t, fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, postgres.MigrateLock), hold)
		var log lockedLog
		start := time.Now()
		db, err := postgres.Open(t.Context(), limited, postgres.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("open gave up after %v while another held the migration lock for %v: %v", took.Round(time.Millisecond), hold, err)
		}
		db.Close()
		if took < hold-100*time.Millisecond {
			t.Errorf("open took %v, the migration lock held %v", took, hold)
		}
		if held, by := fmt.Sprintf("held_by=\"pid %d ", holder), fmt.Sprintf("blocked_by=\"pid %d ", holder); !strings.Contains(log.String(), "waiting for the migration lock") ||
			!strings.Contains(log.String(), held) || !strings.Contains(log.String(), by) {
			t.Errorf("the log does not say, at once and while it lasts, that it waits for the migration lock that pid %d holds:\n%s", holder, log.String())
		}
	})

	t.Run("Stopped", func(t *testing.T) {
		behind(t)
		holdLock(t, `LOCK TABLE delivery_stats IN ACCESS SHARE MODE`, time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(hold/2, cancel)
		start := time.Now()
		_, err := postgres.Open(ctx, limited, postgres.Options{})
		if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "migration "+last+" interrupted") ||
			!strings.Contains(err.Error(), "rolled back") || took > hold {
			t.Errorf("open stopped after %v: %v, want at once an error saying the migration was interrupted and rolled back", took, err)
		}
		if applied(t) {
			t.Error("the interrupted migration is recorded as applied")
		}
	})
}

// TestOpen_KeepsPasswordOut: an error about the URL never shows its password.
// A URL that does not parse is named with what is wrong with it, as far as that can
// be said without quoting it; a scheme in capitals is a URL like any other.
func TestOpen_KeepsPasswordOut(t *testing.T) {
	for _, tt := range []struct{ dsn, want string }{
		{"postgres://hook:s3cret@127.0.0.1:1/hook?sslmode=disable&connect_timeout=1", "connection refused"},
		{"POSTGRES://hook:s3cret@127.0.0.1:1/hook?sslmode=disable&connect_timeout=1", "connection refused"},
		{"postgres://hook:s3cret@127.0.0.1:5432/hook?sslmode=bogus", "sslmode"},
		{"postgres://hook:s3cret@127.0.0.1:1/hook?pool_max_conns=lots", "pool_max_conns"},
		{"postgres://hook:s3cret@[::1/hook", "does not parse"},
		// A password whose /, ? or # is not percent-encoded ends the host part early,
		// and would stand in the path or the query, where pgx's error quotes it.
		{"postgres://hook:2024/s3cret!@127.0.0.1:1/hook?connect_timeout=1", "percent-encode"},
		{"postgres://hook:1234?s3cret@127.0.0.1:1/hook", "percent-encode"},
		{"postgres://hook:9876#s3cret@127.0.0.1:1/hook", "percent-encode"},
	} {
		if r := postgres.Redact(tt.dsn); strings.Contains(r, "s3cret") {
			t.Errorf("Redact shows the password: %s", r)
		}
		_, err := postgres.Open(t.Context(), tt.dsn, postgres.Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", postgres.Redact(tt.dsn), err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// TestOpen_ConnectTimeoutSetByTheURL: a connect_timeout the URL sets, 0 included, is the
// operator's; the word anywhere else in it sets nothing, and connecting keeps its
// default bound.
func TestOpen_ConnectTimeoutSetByTheURL(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://u@h/db?connect_timeout=0":                    true,
		"postgres://u@h/db?sslmode=disable&connect_timeout=5":    true,
		"postgres://u@h/db?application_name=no_connect_timeout=": false,
		"postgres://u:connect_timeout=1@h/db":                    false,
		"postgres://u@h/db":                                      false,
		"host=h dbname=db connect_timeout=0":                     true,
		"host=h connect_timeout = 3":                             true,
		"host=h application_name=x_connect_timeout=1":            false,
	} {
		if got := postgres.SetsConnectTimeout(dsn); got != want {
			t.Errorf("%s: sets connect_timeout %v, want %v", dsn, got, want)
		}
	}
}
