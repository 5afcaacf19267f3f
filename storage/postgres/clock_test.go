package postgres_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestClock_MachinesApart: two replicas on machines whose clocks are two minutes apart
// keep one time, the database server's. The one whose clock runs ahead must not take
// the other's dispatch lease while it lasts (the event would go downstream twice at
// once), nor take a key claimed a minute ago for one whose ttl has run out.
func TestClock_MachinesApart(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	var logged bytes.Buffer
	open := func(machine func() time.Time, log *slog.Logger) *postgres.DB {
		db, err := postgres.Open(ctx, url, postgres.Options{Clock: machine, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := open(time.Now, nil)
	b := open(func() time.Time { return time.Now().Add(2 * time.Minute) }, slog.New(slog.NewTextHandler(&logged, nil)))
	delivery := func(key string) *storage.Delivery {
		return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
			Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
	}
	if err := a.Record(ctx, delivery("leased"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := a.LeaseDue(ctx, a.Clock(), 30*time.Second, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("the first replica leased %d jobs (%v), want 1", len(jobs), err)
	}
	if jobs, err := b.LeaseDue(ctx, b.Clock(), 30*time.Second, 10, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("the replica whose clock is ahead leased %d jobs (%v) while the other's lease lasts, want none", len(jobs), err)
	}

	if err := a.Record(ctx, delivery("held"), storage.ClaimOptions{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	again := delivery("held")
	if err := b.Record(ctx, again, storage.ClaimOptions{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if again.Outcome != storage.Duplicate {
		t.Fatalf("a redelivery, through the replica whose clock is ahead, of a key claimed for a minute just now: %s, want a duplicate", again.Outcome)
	}
	if apart := b.Clock().Sub(a.Clock()); apart > time.Second || apart < -time.Second {
		t.Fatalf("the replicas' clocks are %v apart, want the server's time on both", apart)
	}
	if !strings.Contains(logged.String(), "this machine's clock is ahead of the database server's") {
		t.Errorf("the replica whose clock is two minutes ahead logged %q, want that its clock is ahead", logged.String())
	}
}

// TestClock_MachineStepped: a machine whose clock was ten minutes behind when the
// replica started, then set right (NTP, after boot), keeps the server's time: its
// time runs on from each reading by the monotonic clock, which the step does not move.
// Taken as the wall clock plus the offset first read, it ran ten minutes ahead, and
// took another replica's dispatch lease.
func TestClock_MachineStepped(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	var step atomic.Int64
	step.Store(int64(-10 * time.Minute))
	a, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := postgres.Open(ctx, url, postgres.Options{Clock: func() time.Time { return time.Now().Add(time.Duration(step.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	step.Store(0)

	d := &storage.Delivery{Source: "ota", Status: 200, Key: "leased", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"leased"}`), ContentType: "application/json"}
	if err := a.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := a.LeaseDue(ctx, a.Clock(), 30*time.Second, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("the first replica leased %d jobs (%v), want 1", len(jobs), err)
	}
	if jobs, err := b.LeaseDue(ctx, b.Clock(), 30*time.Second, 10, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("the replica whose machine's clock was set right after it started leased %d jobs (%v) while the other's lease lasts, want none",
			len(jobs), err)
	}
	if apart := b.Clock().Sub(a.Clock()); apart > time.Second || apart < -time.Second {
		t.Fatalf("the replicas' clocks are %v apart, want the server's time on both", apart)
	}
}
