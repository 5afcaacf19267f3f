package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_KeyThroughClaim_Model runs random sequences of everything that changes a
// claim or a delivery (single deliveries and batches, claims that expire at once or in
// an hour, business keys that block, releases and reprocesses from this process and
// from another one on the same file, bulk releases, the claims sweep, the retention
// sweep) and checks after each step that every way of finding a key's deliveries gives
// exactly the deliveries stored under it, read without any index; and that a delivery
// left out of the index of keys is named by its own key's claim.
func TestDB_KeyThroughClaim_Model(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { keyClaimModel(t, seed) })
	}
}

func keyClaimModel(t *testing.T, seed uint64) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	defer sqlite.SetForensicFlushAt(3)()
	other := storagetest.OpenPath(t, db.Path(), sqlite.Options{}) // as the release command would
	other.Now = clk.Now
	raw := rawDB(t, db.Path())
	rng := rand.New(rand.NewPCG(seed, 7))
	sources := []string{"ota", "cm"}
	keys := []string{"evt_1", "evt_2", "evt_3"}
	mk := func() *storage.Delivery {
		d := delivery(sources[rng.IntN(2)], keys[rng.IntN(len(keys))], fmt.Sprintf("h%d", rng.IntN(2)))
		d.Body = []byte(`{"v":"` + d.PayloadHash + `"}`)
		if rng.IntN(3) == 0 {
			d.BusinessKey = fmt.Sprintf("B%d", rng.IntN(2))
		}
		return d
	}
	opts := func() storage.ClaimOptions {
		o := storage.ClaimOptions{TTL: []time.Duration{0, time.Hour}[rng.IntN(2)], Dispatch: rng.IntN(4) == 0}
		if rng.IntN(2) == 0 {
			o.BusinessWindow, o.BusinessBlocks = time.Hour, true
		}
		return o
	}
	var steps []string

	for step := range 100 {
		var what string
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			d := mk()
			what = fmt.Sprintf("record %s/%s", d.Source, d.Key)
			storagetest.Record(t, db, d, opts())
		case 3:
			n := 2 + rng.IntN(3)
			ds := make([]*storage.Delivery, n)
			for i := range ds {
				ds[i] = mk()
				ds[i].Source = ds[0].Source
			}
			what = fmt.Sprintf("batch of %d", n)
			if err := db.RecordBatch(ctx, ds, opts()); err != nil {
				t.Fatal(err)
			}
		case 4:
			d := time.Duration(rng.IntN(120)) * time.Minute
			what = fmt.Sprintf("clock +%s", d)
			clk.Add(d)
		case 5:
			on := []*sqlite.DB{db, other}[rng.IntN(2)]
			r := storage.Release{Source: sources[rng.IntN(2)], Key: keys[rng.IntN(len(keys))], Actor: "op", Reason: "test",
				Reprocess: rng.IntN(3) == 0, StuckBefore: clk.Now().Add(time.Hour)}
			what = fmt.Sprintf("release %s/%s reprocess %v (other process %v)", r.Source, r.Key, r.Reprocess, on == other)
			on.ReleaseKey(ctx, r) // refusals (no such key, payload gone) are part of the game
		case 6:
			what = "bulk release"
			if _, err := db.ReleaseKeys(ctx, storage.KeyFilter{Source: sources[rng.IntN(2)]},
				storage.Release{Actor: "op", Reason: "bulk", StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		case 7:
			what = "claims sweep"
			if _, err := []*sqlite.DB{db, other}[rng.IntN(2)].SweepExpired(ctx, clk.Now(), 100); err != nil {
				t.Fatal(err)
			}
		case 8:
			what = "retention sweep"
			cur := storage.SweepCursor{}
			for i := 0; !cur.Done() && i < 100; i++ {
				var err error
				if _, cur, err = db.SweepDeliveries(ctx, clk.Now(), clk.Now().Add(-30*time.Minute), cur, 3); err != nil {
					t.Fatal(err)
				}
			}
		case 9:
			what = "business keys sweep"
			if _, err := db.SweepBusinessKeys(ctx, clk.Now().Add(-time.Hour), 100); err != nil {
				t.Fatal(err)
			}
		}
		steps = append(steps, what)
		for _, src := range sources {
			for _, key := range keys {
				if msg := keyLookupsAgree(ctx, raw, db, src, key, sources); msg != "" {
					t.Fatalf("after step %d (%s): %s\nsteps: %q", step, what, msg, steps)
				}
			}
		}
		var lost []int64
		rows, err := raw.Query(`SELECT id FROM deliveries NOT INDEXED WHERE by_claim != 0 AND NOT EXISTS (
			SELECT 1 FROM claims c WHERE c.first_delivery = deliveries.id AND c.source = deliveries.source AND c.key = deliveries.key)`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			lost = append(lost, id)
		}
		rows.Close()
		if len(lost) > 0 {
			t.Fatalf("after step %d (%s): deliveries %v are out of the index of keys and named by no claim of their key\nsteps: %q",
				step, what, lost, steps)
		}
	}
}

// keyLookupsAgree says how the ways of finding source's key's deliveries disagree with
// the rows read without an index, or "" when they all agree: KeyDeliveries,
// FirstKeyDeliveries at each limit (and its has-more), and the events list filtered by
// the key under its source and under several sources.
func keyLookupsAgree(ctx context.Context, raw *sql.DB, db *sqlite.DB, source, key string, sources []string) string {
	var want []int64
	rows, err := raw.QueryContext(ctx, `SELECT id FROM deliveries NOT INDEXED WHERE source = ? AND key = ? ORDER BY id`, source, key)
	if err != nil {
		return err.Error()
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		want = append(want, id)
	}
	rows.Close()
	ids := func(ds []storage.Delivery) []int64 {
		var out []int64
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	all, err := db.KeyDeliveries(ctx, source, key)
	if err != nil {
		return err.Error()
	}
	if got := ids(all); !slices.Equal(got, want) {
		return fmt.Sprintf("KeyDeliveries(%s, %s) = %v, want %v", source, key, got, want)
	}
	for limit := range len(want) + 1 {
		first, more, err := db.FirstKeyDeliveries(ctx, source, key, limit)
		if err != nil {
			return err.Error()
		}
		if got := ids(first); !slices.Equal(got, want[:limit]) || more != (limit < len(want)) {
			return fmt.Sprintf("FirstKeyDeliveries(%s, %s, %d) = %v, %v; want %v, %v", source, key, limit, got, more, want[:limit], limit < len(want))
		}
	}
	newest := slices.Clone(want)
	slices.Reverse(newest)
	for _, f := range []storage.DeliveryFilter{{Key: key, Source: source, Limit: 500}, {Key: key, KeySources: []string{source}, Limit: 500}} {
		page, err := db.Deliveries(ctx, f)
		if err != nil {
			return err.Error()
		}
		if got := ids(page.Deliveries); !slices.Equal(got, newest) {
			return fmt.Sprintf("Deliveries(%+v) = %v, want %v", f, got, newest)
		}
	}
	// A page at a time: the pages put together are the whole list.
	var paged []int64
	for f, i := (storage.DeliveryFilter{Key: key, Source: source, Limit: 2}), 0; i < 100; i++ {
		page, err := db.Deliveries(ctx, f)
		if err != nil {
			return err.Error()
		}
		paged = append(paged, ids(page.Deliveries)...)
		if page.Next == 0 {
			break
		}
		f.Before = page.Next
	}
	if !slices.Equal(paged, newest) {
		return fmt.Sprintf("Deliveries(key %s/%s) two at a time = %v, want %v", source, key, paged, newest)
	}
	// Under every source: the key's deliveries of each.
	var both []int64
	for _, s := range sources {
		ds, err := db.KeyDeliveries(ctx, s, key)
		if err != nil {
			return err.Error()
		}
		both = append(both, ids(ds)...)
	}
	slices.Sort(both)
	slices.Reverse(both)
	page, err := db.Deliveries(ctx, storage.DeliveryFilter{Key: key, KeySources: sources, Limit: 500})
	if err != nil {
		return err.Error()
	}
	if got := ids(page.Deliveries); !slices.Equal(got, both) {
		return fmt.Sprintf("Deliveries(key %s, sources %v) = %v, want %v", key, sources, got, both)
	}
	return ""
}
