package postgres_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestClock_OutageLoggedOnce: while the PostgreSQL server is down, every reading of its
// clock fails. It is logged once, then at most once a minute, and once when a reading
// works again: a line a reading for the whole outage is what README bounds, and the
// log never said when the replica took the server's time again.
func TestClock_OutageLoggedOnce(t *testing.T) {
	cl := postgrestest.NewCluster(t)
	url := cl.NewDatabase(t, "clock_outage")
	postgres.SetClockEvery(t, 10*time.Millisecond)
	var logs lockedLog
	db, err := postgres.Open(t.Context(), url, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	const failed = `msg="could not read the database server's clock`
	cl.Stop(t)
	time.Sleep(time.Second) // a hundred readings, all failing
	if n := strings.Count(logs.String(), failed); n != 1 {
		t.Fatalf("%d lines for a second of failed readings of the clock, want 1:\n%s", n, logs.String())
	}
	cl.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), `msg="the database server's clock read again"`) {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("no line says the clock is read again:\n%s", logs.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
