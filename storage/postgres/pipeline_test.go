package postgres_test

import (
	"fmt"
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
