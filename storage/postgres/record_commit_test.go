package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_ConnectionEndedAfterTheCommit: a server that ends intake's connection as
// it commits (a restart or an administrator ending connections, whose signal lands
// while the commit waits for its flush) ends it once the commit is done: the commit's
// answer comes, and the connection's end right after it. The deliveries are stored,
// and are answered so, not 503: a provider's retry would be stored as a duplicate of
// an event received once, counted as a double caught.
func TestRecord_ConnectionEndedAfterTheCommit(t *testing.T) {
	ctx := t.Context()
	db, admin := openSlowCommits(t)
	if err := db.Record(ctx, testDelivery("before"), day); err != nil {
		t.Fatal(err)
	}
	d := testDelivery("evt_1")
	recorded := make(chan error, 1)
	go func() { recorded <- db.Record(ctx, d, day) }()
	endAtCommit(t, admin)
	err := <-recorded
	got, kerr := db.KeyDeliveries(ctx, "ota", "evt_1")
	if kerr != nil {
		t.Fatal(kerr)
	}
	if len(got) != 1 {
		t.Fatalf("%d deliveries of evt_1 stored (Record: %v), want 1", len(got), err)
	}
	if err != nil || d.Outcome != storage.Accepted || d.ID != got[0].ID {
		t.Errorf("stored as delivery %d, but Record answered %v (%s, %d): want it accepted", got[0].ID, err, d.Outcome, d.ID)
	}
}

// openSlowCommits opens a database whose every commit waits 100 ms before its flush,
// with the server's interrupts held (commit_delay): a termination then lands during
// the commit, and takes effect once it is done. It returns the DB and a connection of
// the test's own, whose commits are not slowed.
func openSlowCommits(t *testing.T) (*postgres.DB, *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	admin := postgrestest.Connect(t, url)
	var name string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET commit_delay = 100000;
		ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET commit_siblings = 0`); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, url, postgres.Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, admin
}

// endAtCommit ends the connection of the first session seen committing.
func endAtCommit(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	for deadline, ended := time.Now().Add(10*time.Second), false; !ended; {
		if time.Now().After(deadline) {
			t.Fatal("no commit seen running")
		}
		if err := admin.QueryRow(t.Context(), `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND query = 'commit'`).Scan(&ended); err != nil {
			t.Fatal(err)
		}
	}
}
