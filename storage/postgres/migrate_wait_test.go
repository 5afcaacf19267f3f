package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_WaitingMigrationLeavesRunningReplicasTheirWrites: a rolling upgrade. Replica A runs;
// replica B, newer, starts and its migration (ALTER TABLE delivery_stats) waits for the
// ACCESS EXCLUSIVE lock behind a long reader (a pg_dump, an idle-in-transaction psql).
// A queued request for it would block every later lock on the table, A's writes to
// delivery_stats (here the rejection totals, as intake writes them) among them, for as
// long as the reader runs: the migration waits for its locks a moment at a time
// (migrationLockTimeout), and A's write goes through while B waits.
func TestOpen_WaitingMigrationLeavesRunningReplicasTheirWrites(t *testing.T) {
	const last = "migrations/0022_stats_unsummed.sql"
	url := postgrestest.NewDatabase(t)
	a, err := postgres.Open(t.Context(), url, postgres.Options{BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN IF EXISTS unsummed;
		DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
		t.Fatal(err)
	}
	reader := postgrestest.Connect(t, url)
	if _, err := reader.Exec(t.Context(), `BEGIN; SELECT count(*) FROM delivery_stats`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Exec(context.Background(), `ROLLBACK`) })

	ctx, cancel := context.WithCancel(t.Context())
	opened := make(chan error, 1)
	go func() {
		b, err := postgres.Open(ctx, url, postgres.Options{})
		if err == nil {
			b.Close()
		}
		opened <- err
	}()
	t.Cleanup(func() { cancel(); <-opened })
	// Until B's migration waits for its lock.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'delivery_stats'::regclass)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's migration never waited for delivery_stats")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // well past any bound a migration's lock wait might have
	select {
	case err := <-opened:
		opened <- err
		t.Logf("B's open ended: %v", err)
	default:
		t.Logf("B's open still waits after 3s")
	}
	err = a.AddRejectionCounts(t.Context(), []storage.RejectionCount{{Source: "ota", Status: 401, Minute: time.Now(), Rejections: 1}})
	if err != nil {
		t.Errorf("running replica A cannot write delivery_stats while B's migration waits behind a reader: %v", err)
	}
}

// TestOpen_WaitLogKeepsOtherSessionsStatements: while a migration waits for a lock, Open
// logs every waitReport the sessions that hold it up. The blocker is any session on
// the database, an operator's psql among them: here one that read delivery_stats in a
// transaction it left open, and whose last statement set a role's password. The log
// (journald, a log shipper) names the session and its statement's first word, never
// the statement's text, password and all.
func TestOpen_WaitLogKeepsOtherSessionsStatements(t *testing.T) {
	postgres.ReportWaitsEvery(t, 200*time.Millisecond)
	const last = "migrations/0022_stats_unsummed.sql"
	const secret = "hunter2-topsecret"
	url := postgrestest.NewDatabase(t)
	open(t, url).Close()
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN IF EXISTS unsummed;
		DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
		t.Fatal(err)
	}
	// An operator's session, idle in transaction: it read the table, then changed a
	// password (rolled back below, so nothing changes).
	op := postgrestest.Connect(t, url)
	for _, q := range []string{`BEGIN`, `SELECT count(*) FROM delivery_stats`, `ALTER ROLE CURRENT_USER PASSWORD '` + secret + `'`} {
		if _, err := op.Exec(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	done := make(chan struct{})
	timer := time.AfterFunc(1500*time.Millisecond, func() {
		defer close(done)
		op.Exec(context.Background(), `ROLLBACK`)
	})
	t.Cleanup(func() {
		if !timer.Stop() {
			<-done // the ROLLBACK ran: the connection is closed after it
		}
	})

	var log lockedLog
	db, err := postgres.Open(t.Context(), url, postgres.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if !strings.Contains(log.String(), "blocked_by") {
		t.Fatalf("the migration's wait was not logged:\n%s", log.String())
	}
	if strings.Contains(log.String(), secret) {
		t.Errorf("the log of the migration's wait holds the blocking session's password:\n%s", log.String())
	}
}
