package postgres_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_BusinessKeyNamesTheFirst: two replicas record one business key under two
// keys at once; the one whose transaction took the key's lock first is the original
// even though the other took the smaller delivery id (it waited in between, here for
// a claim row). A third delivery of the business key must then name that original, as
// the second does, not the second (itself a suspect of the first), as the SQLite
// engine, whose ids follow its commits, does.
func TestRecord_BusinessKeyNamesTheFirst(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	slow, fast := openEngine(t, url), openEngine(t, url)
	admin := postgrestest.Connect(t, url)
	now := time.Now().UnixMilli()
	// An expired processed claim of the slow replica's key: its trace locks it.
	if _, err := admin.Exec(ctx, `INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
VALUES ('ota', 'evt_slow', 'processed', 0, 'h', $1::bigint - 7200000, $1::bigint - 3600000, $1::bigint - 7200000)`, now); err != nil {
		t.Fatal(err)
	}
	holder := postgrestest.Connect(t, url)
	hold, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM claims WHERE key = 'evt_slow' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	delivery := func(key string) *storage.Delivery {
		d := testDelivery(key)
		d.BusinessKey = "B"
		return d
	}
	second := delivery("evt_slow")
	done := make(chan error, 1)
	go func() { done <- slow.Record(ctx, second, opt) }()
	waitFor(t, "the slow replica to wait for the claim", func() (bool, error) {
		var w int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&w)
		return w >= 1, err
	})
	first := delivery("evt_fast")
	if err := fast.Record(ctx, first, opt); err != nil {
		t.Fatal(err)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if second.ID > first.ID {
		t.Skipf("ids %d and %d follow the locks: nothing to show", second.ID, first.ID)
	}
	f, err := slow.FlagsOf(ctx, second.ID)
	if err != nil || len(f.Suspects) == 0 || f.Suspects[0].Kind != storage.SuspectBusinessKey || f.Suspects[0].Other != first.ID {
		t.Fatalf("second's flags = %+v, %v; want a business key suspect naming %d", f.Suspects, err, first.ID)
	}
	third := delivery("evt_third")
	if err := fast.Record(ctx, third, opt); err != nil {
		t.Fatal(err)
	}
	f, err = fast.FlagsOf(ctx, third.ID)
	if err != nil || len(f.Suspects) == 0 {
		t.Fatalf("third's flags = %+v, %v", f, err)
	}
	for _, s := range f.Suspects {
		if s.Delivery == third.ID && s.Other != first.ID {
			t.Errorf("third names %d (a suspect itself), want the original %d", s.Other, first.ID)
		}
	}
}
