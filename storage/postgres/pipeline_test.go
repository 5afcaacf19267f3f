package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_PlansForItsArrays: intake's statements that join an array of keys to a
// table are planned for each transaction's arrays and the tables as they are then,
// never run by a generic plan: one made while the tables were small (an empty
// database, every fresh install) would scan them whole for every batch as they fill.
func TestRecord_PlansForItsArrays(t *testing.T) {
	ctx := t.Context()
	// One connection: the writers' statements are prepared on the one GenericPlans asks.
	db, err := postgres.Open(ctx, postgrestest.NewDatabase(t), postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Each key twice, one transaction each: the claim of the second loses, so every
	// statement of a transaction runs, each more often than PostgreSQL's five custom
	// plans before it may settle on a generic one.
	for i := range 16 {
		d := testDelivery(fmt.Sprintf("key_%d", i/2))
		if err := db.Record(ctx, d, day); err != nil {
			t.Fatal(err)
		}
		if want := []storage.Outcome{storage.Accepted, storage.Duplicate}[i%2]; d.Outcome != want {
			t.Fatalf("delivery %d: %s, want %s", i, d.Outcome, want)
		}
	}
	plans, err := postgres.GenericPlans(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) < 3 {
		t.Fatalf("%d joining statements prepared, want intake's (traces, holders, late duplicates): %v", len(plans), plans)
	}
	for stmt, n := range plans {
		if n > 0 {
			t.Errorf("run %d times by a generic plan:\n%s", n, stmt)
		}
	}
}

// TestRecord_InsertErrorFailsOnlyItself: a request whose delivery the database refuses
// once its claim is made (a booking too long for its index), in one transaction with
// others, fails alone, and its claim with it; the others are stored. The refusal comes
// in the round trip that also carries the commit: the commit must not go through.
func TestRecord_InsertErrorFailsOnlyItself(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	release, blocked := blockIntake(t, db, url)

	noise := make([]byte, 6000)
	rand.Read(noise)
	long := base64.StdEncoding.EncodeToString(noise) // random: PostgreSQL cannot compress it under the limit
	keys := []string{"good_1", "bad", "good_2", "good_3"}
	errs := make([]error, len(keys))
	ds := make([]*storage.Delivery, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		ds[i] = testDelivery(key)
		if key == "bad" {
			ds[i].Booking = long
		}
		wg.Go(func() { errs[i] = db.Record(ctx, ds[i], day) })
	}
	waitFor(t, "the deliveries to queue", func() (bool, error) { return postgres.QueuedRecords(db) == len(keys), nil })
	release()
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked delivery: %v", err)
	}
	for i, key := range keys {
		if key == "bad" {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "index row") {
				t.Errorf("the long booking: %v, want the index's refusal", errs[i])
			}
			if _, err := db.Claim(ctx, "ota", key); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("the refused delivery's key is claimed: %v", err)
			}
			if got, err := db.KeyDeliveries(ctx, "ota", key); err != nil || len(got) != 0 {
				t.Errorf("the refused delivery: %d stored, %v; want none", len(got), err)
			}
			continue
		}
		if errs[i] != nil || ds[i].Outcome != storage.Accepted {
			t.Errorf("%s: %v, %s; want accepted", key, errs[i], ds[i].Outcome)
			continue
		}
		if got, err := db.Delivery(ctx, ds[i].ID); err != nil || got.Key != key {
			t.Errorf("%s: stored %+v, %v", key, got, err)
		}
	}
	// The connection that carried the refused transaction serves the next one.
	d := testDelivery("after")
	if err := db.Record(context.Background(), d, day); err != nil || d.Outcome != storage.Accepted {
		t.Errorf("a delivery after the refusal: %v, %s", err, d.Outcome)
	}
}
