package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestDB_ForensicFilter_Model: whatever the writer's filter of keys holds, a delivery is
// flagged a business key double (or blocked, with business_key_blocks), a correlation
// and a late duplicate exactly when a look-up of the tables themselves, through no
// index, finds what it doubles. Random steps mix deliveries of a few keys and hashes
// (some not hex, some alike in their first 8 bytes) from two sources with the sweeps
// (the claims sweep running beside the writer too), releases, another process's traces
// and keys, keys moved from pending to indexed, the writer's bound on noted traces
// overflowing, and restarts.
func TestDB_ForensicFilter_Model(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	defer sqlite.SetForensicFlushAt(5)()
	defer sqlite.SetTracedMax(3)()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	open := func() *sqlite.DB {
		db, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	defer func() { db.Close() }()
	clock := newClock(db)
	raw := rawDB(t, path)
	rng := rand.New(rand.NewPCG(7, 11))

	// The oracle: what a delivery of key with business key bk at now should be flagged.
	wantBusiness := func(source, key, bk string, now time.Time) bool {
		var n int
		err := raw.QueryRow(`SELECT count(*) FROM (
	SELECT source, hash, delivery, seen_at FROM business_keys NOT INDEXED
	UNION ALL SELECT source, hash, delivery, seen_at FROM forensic_keys_pending WHERE rule = '') x
	LEFT JOIN deliveries d ON d.id = x.delivery
	WHERE x.source = ?4 AND (CASE WHEN typeof(x.hash) = 'blob' THEN lower(hex(x.hash)) ELSE x.hash END) = ?1
		AND x.seen_at >= ?2 AND coalesce(d.key, '') != ?3`, bk, now.Add(-time.Hour).UnixMilli(), key, source).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	wantLate := func(source, key string, now time.Time) bool {
		var n int
		err := raw.QueryRow(`SELECT (SELECT count(*) FROM key_traces NOT INDEXED WHERE source = ?4 AND key_hash = ?1)
	+ (SELECT count(*) FROM claims NOT INDEXED WHERE source = ?4 AND key = ?2 AND state = 'processed' AND expires_at <= ?3)`,
			storage.KeyHash(key), key, now.UnixMilli(), source).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	// A claim that a new delivery of key cannot take over: one being processed, one
	// processed and not expired.
	claimHeld := func(source, key string, now time.Time) bool {
		var n int
		err := raw.QueryRow(`SELECT count(*) FROM claims NOT INDEXED WHERE source = ? AND key = ?
	AND (state = 'processing' OR state NOT IN ('released') AND expires_at > ?)`, source, key, now.UnixMilli()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	wantCorrelation := func(source, hash string, now time.Time) bool {
		var n int
		err := raw.QueryRow(`SELECT count(*) FROM (
	SELECT rule, hash, source, seen_at FROM correlation_keys NOT INDEXED
	UNION ALL SELECT rule, hash, source, seen_at FROM forensic_keys_pending WHERE rule != '') x
	WHERE x.rule = 'r' AND (CASE WHEN typeof(x.hash) = 'blob' THEN lower(hex(x.hash)) ELSE x.hash END) = ?
		AND x.seen_at >= ? AND x.source != ?`, hash, now.Add(-time.Hour).UnixMilli(), source).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	const prefix = "00000000deadbeef"
	var sweeps sync.WaitGroup
	defer sweeps.Wait()
	foreign := 0
	for step := range 2000 {
		now := clock.Now()
		switch op := rng.IntN(100); {
		case op < 60:
			source := []string{"ota", "psp"}[rng.IntN(2)]
			key := fmt.Sprintf("evt_%d", rng.IntN(40))
			business := hexHash(fmt.Sprintf("b%d", rng.IntN(15)))
			correlation := hexHash(fmt.Sprintf("c%d", rng.IntN(15)))
			switch rng.IntN(5) {
			case 0:
				// Hashes no receiver makes are stored as the text they are.
				business, correlation = strings.ToUpper(business), correlation[:63]
			case 1, 2:
				// Hashes whose first 8 bytes, which the look-ups seek, are all alike.
				business, correlation = prefix+business[16:], prefix+correlation[16:]
			}
			wantB, wantL, held := wantBusiness(source, key, business, now), wantLate(source, key, now), claimHeld(source, key, now)
			wantC := wantCorrelation(source, correlation, now)
			d := delivery(source, key, "h-"+key)
			d.BusinessKey = business
			d.Correlations = []storage.CorrelationKey{{Rule: "r", Hash: correlation, Window: time.Hour}}
			claim := forensicClaim
			claim.BusinessBlocks = rng.IntN(3) == 0
			if err := db.Record(ctx, d, claim); err != nil {
				t.Fatal(err)
			}
			want := storage.Accepted
			if held || claim.BusinessBlocks && wantB {
				want = storage.Duplicate
			}
			if d.Outcome != want {
				t.Fatalf("step %d: %s (business key %.24s, blocks %v) is %s, want %s (filters %d)",
					step, key, business, claim.BusinessBlocks, d.Outcome, want, db.KeyFilters())
			}
			if d.Outcome != storage.Accepted {
				continue
			}
			if got := flagged(d, storage.SuspectBusinessKey); got != wantB {
				t.Fatalf("step %d: %s (business key %.24s) flagged a business key double: %v, want %v (filters %d)",
					step, key, business, got, wantB, db.KeyFilters())
			}
			if got := flagged(d, storage.SuspectCorrelation); got != wantC {
				t.Fatalf("step %d: %s of %s (correlation %.24s) flagged a correlation: %v, want %v (filters %d)",
					step, key, source, correlation, got, wantC, db.KeyFilters())
			}
			if got := flagged(d, storage.SuspectLateDuplicate); got != wantL {
				t.Fatalf("step %d: %s flagged a late duplicate: %v, want %v (filters %d)", step, key, got, wantL, db.KeyFilters())
			}
		case op < 70:
			clock.Add(time.Duration(rng.IntN(40)) * time.Minute)
		case op < 77:
			// The claims sweep runs beside the writer: it only turns expired claims into
			// traces, which the oracle counts alike.
			sweeps.Add(1)
			go func(now time.Time, limit int) {
				defer sweeps.Done()
				if _, err := db.SweepExpired(ctx, now, limit); err != nil {
					t.Error(err)
				}
			}(now, 1+rng.IntN(5))
			if rng.IntN(2) == 0 {
				sweeps.Wait()
			}
		case op < 80:
			sweeps.Wait()
			if _, err := db.SweepTraces(ctx, now.Add(-time.Duration(rng.IntN(120))*time.Minute), 1+rng.IntN(5)); err != nil {
				t.Fatal(err)
			}
		case op < 83:
			sweeps.Wait()
			if _, err := db.SweepBusinessKeys(ctx, now.Add(-time.Hour), 1+rng.IntN(5)); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SweepCorrelationKeys(ctx, now.Add(-time.Hour), 1+rng.IntN(5)); err != nil {
				t.Fatal(err)
			}
		case op < 88:
			sweeps.Wait()
			key := fmt.Sprintf("evt_%d", rng.IntN(40))
			var n int
			if err := raw.QueryRow(`SELECT count(*) FROM claims WHERE source = 'ota' AND key = ? AND state = 'processed'`, key).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: key, Actor: "ann", Reason: "test",
					StuckBefore: now.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
		case op < 92:
			// Another process traces a key, or stores a business key.
			sweeps.Wait()
			foreign++
			if rng.IntN(2) == 0 {
				rawExecArgs(t, raw, `INSERT OR REPLACE INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at)
	VALUES ('ota', ?, ?, 0, ?)`, storage.KeyHash(fmt.Sprintf("evt_%d", rng.IntN(40))), now.UnixMilli(), now.UnixMilli())
			} else {
				rawExecArgs(t, raw, `INSERT INTO business_keys (delivery, source, hash, seen_at) VALUES (?, 'ota', unhex(?), ?)`,
					1_000_000+foreign, hexHash(fmt.Sprintf("b%d", rng.IntN(15))), now.UnixMilli())
			}
		case op < 94:
			sweeps.Wait()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = open()
			db.Now = clock.Now
		default:
			// Give a build the time to finish, so that the filter is in use.
			time.Sleep(time.Millisecond)
		}
	}
	if db.KeyFilters() == 0 {
		t.Error("the writer never took a filter of keys into use: the model tested nothing")
	}
}

func rawExecArgs(t *testing.T, raw *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := raw.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
