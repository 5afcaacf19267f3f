package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The indexed business and correlation keys are found by the day each was seen: a
// look-up finds a key seen on any day of its window, the window's first day and first
// millisecond included and the millisecond before it not, and a key seen on a day
// ahead of the clock (a clock set back), whatever days between hold keys or none.
// Every key is moved to its indexed table at once, as intake moves them in the end.
func TestDB_ForensicKeys_AcrossDays(t *testing.T) {
	defer sqlite.SetForensicFlushAt(1)()
	ctx := context.Background()
	db := storagetest.Open(t)
	clock := newClock(db)
	const window = 14 * 24 * time.Hour
	const refundWindow = 72 * time.Hour
	claim := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window}
	keyed := func(source, key, business, refund string) *storage.Delivery {
		d := delivery(source, key, "h-"+key)
		d.BusinessKey = business
		if refund != "" {
			d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: refund, Window: refundWindow}}
		}
		return d
	}
	record := func(d *storage.Delivery) *storage.Delivery {
		t.Helper()
		if err := db.Record(ctx, d, claim); err != nil {
			t.Fatal(err)
		}
		if d.Outcome != storage.Accepted {
			t.Fatalf("%s: %s, want accepted", d.Key, d.Outcome)
		}
		return d
	}
	// suspect is the suspect of kind that d is flagged as, or that a probe of it at now
	// would be (lab): the delivery it names, 0 for none.
	suspect := func(d *storage.Delivery, kind storage.SuspectKind, lab bool, now time.Time) int64 {
		t.Helper()
		var sus []storage.Suspect
		if lab {
			var err error
			sus, err = db.WouldFlag(ctx, storage.Probe{Source: d.Source, Key: d.Key, BusinessKey: d.BusinessKey,
				BusinessWindow: window, Correlations: d.Correlations, Now: now})
			if err != nil {
				t.Fatal(err)
			}
		} else {
			f, err := db.FlagsOf(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range f.Suspects {
				if s.Delivery == d.ID {
					sus = append(sus, s)
				}
			}
		}
		i := slices.IndexFunc(sus, func(s storage.Suspect) bool { return s.Kind == kind })
		if i < 0 {
			return 0
		}
		return sus[i].Other
	}
	check := func(what string, d *storage.Delivery, kind storage.SuspectKind, want int64) {
		t.Helper()
		if got := suspect(d, kind, false, time.Time{}); got != want {
			t.Errorf("%s: %s names %d, want %d", what, kind, got, want)
		}
	}
	probe := func(what string, d *storage.Delivery, kind storage.SuspectKind, now time.Time, want int64) {
		t.Helper()
		if got := suspect(d, kind, true, now); got != want {
			t.Errorf("%s, in the key lab: %s names %d, want %d", what, kind, got, want)
		}
	}

	start := clock.Now()
	first := record(keyed("ota", "evt_1", "B", "R"))
	// Every day of the window holds keys of other bookings.
	for i := 1; i < 14; i++ {
		clock.Add(24 * time.Hour)
		record(keyed("ota", fmt.Sprintf("fill_%d", i), fmt.Sprintf("F%d", i), fmt.Sprintf("G%d", i)))
		if i == 3 { // the refund's window ends now
			pay := keyed("psp", "pay_1", "", "R")
			probe("the refund 72 hours on", pay, storage.SuspectCorrelation, clock.Now(), first.ID)
			probe("the refund 72 hours and a millisecond on", pay, storage.SuspectCorrelation, clock.Now().Add(time.Millisecond), 0)
		}
	}
	clock.Add(24 * time.Hour)
	if got := clock.Now(); got != start.Add(window) {
		t.Fatalf("clock at %v, want %v", got, start.Add(window))
	}
	again := keyed("ota", "evt_2", "B", "")
	probe("the business key 14 days on", again, storage.SuspectBusinessKey, clock.Now(), first.ID)
	probe("the business key 14 days and a millisecond on", again, storage.SuspectBusinessKey, clock.Now().Add(time.Millisecond), 0)
	record(again)
	check("the business key 14 days on", again, storage.SuspectBusinessKey, first.ID)

	// The clock is set back two days: the keys seen since are ahead of it.
	ahead := record(keyed("ota", "evt_3", "D", "S"))
	clock.Add(-48 * time.Hour)
	late := keyed("ota", "evt_4", "D", "")
	probe("a business key seen ahead of the clock", late, storage.SuspectBusinessKey, clock.Now(), ahead.ID)
	record(late)
	check("a business key seen ahead of the clock", late, storage.SuspectBusinessKey, ahead.ID)
	pay := keyed("psp", "pay_2", "", "S")
	probe("a refund seen ahead of the clock", pay, storage.SuspectCorrelation, clock.Now(), ahead.ID)
	record(pay)
	check("a refund seen ahead of the clock", pay, storage.SuspectCorrelation, ahead.ID)

	pending, indexed, err := db.ForensicKeyCounts(ctx)
	if err != nil || pending != 0 || indexed == 0 {
		t.Fatalf("keys pending %d, indexed %d, %v; want all indexed", pending, indexed, err)
	}
}

// A database whose keys were indexed by their hash alone is indexed by the day as it is
// opened, and each look-up, of intake and of the key lab, finds the earliest key seen
// at or after its window's first millisecond, wherever that falls: on a day's first or
// last millisecond, before 1970 (whose days SQLite's division rounds toward zero, the
// days either side of it one), ten years ahead of the others, or before every key held
// (a window longer than the data); and none past the last.
func TestDB_ForensicKeys_DayEdges(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	if err := storagetest.OpenPath(t, path, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	const day = 86400000
	const midnight = 20729 * day // 2026-10-03, the first millisecond of a day
	seen := []int64{-2*day - 1, -day - 1, -day, -day + 1, -1, 0, 1, day - 1, day, day + 1,
		midnight - 1, midnight, midnight + 1, midnight + day - 1, midnight + 3650*day}
	var since []int64
	for _, s := range seen {
		since = append(since, s-1, s, s+1)
	}
	since = append(since, -10*day, midnight+3651*day)
	slices.Sort(since)
	since = slices.Compact(since)

	// Back to the index of before, each look-up's keys stored at every one of seen, the
	// delivery numbered in the order seen.
	stmts := []string{
		`DROP INDEX business_keys_hash`, `CREATE INDEX business_keys_hash ON business_keys (substr(hash, 1, 8))`,
		`DROP INDEX correlation_keys_hash`, `CREATE INDEX correlation_keys_hash ON correlation_keys (substr(hash, 1, 8))`,
		`DELETE FROM migrations WHERE name LIKE '%0041_%'`,
	}
	first := func(j, k int) int64 { return int64(1_000_000 + 100*j + k) }
	for j := range since {
		for k, s := range seen {
			stmts = append(stmts,
				fmt.Sprintf(`INSERT INTO business_keys (delivery, source, hash, seen_at) VALUES (%d, 'ota', unhex('%s'), %d)`,
					first(j, k), hexHash(fmt.Sprint("b", j)), s),
				fmt.Sprintf(`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at) VALUES ('r', unhex('%s'), 'psp', %d, %d)`,
					hexHash(fmt.Sprint("c", j)), first(j, k), s))
		}
	}
	execFile(t, path, stmts...)

	db := storagetest.OpenPath(t, path, sqlite.Options{})
	var index string
	if err := rawDB(t, path).QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'business_keys_hash'`).Scan(&index); err != nil ||
		!strings.Contains(index, "seen_at / 86400000") {
		t.Fatalf("business_keys_hash after the upgrade: %q, %v", index, err)
	}
	clock := storagetest.NewClock(time.UnixMilli(since[0]))
	db.Now = clock.Now
	const window = time.Hour
	claim := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window}
	for j, s := range since {
		var want int64
		if k := slices.IndexFunc(seen, func(at int64) bool { return at >= s }); k >= 0 {
			want = first(j, k)
		}
		clock.Add(time.UnixMilli(s).Add(window).Sub(clock.Now()))
		d := delivery("ota", fmt.Sprint("evt_", j), fmt.Sprint("h-", j))
		d.BusinessKey = hexHash(fmt.Sprint("b", j))
		d.Correlations = []storage.CorrelationKey{{Rule: "r", Hash: hexHash(fmt.Sprint("c", j)), Window: window}}
		lab, err := db.WouldFlag(ctx, storage.Probe{Source: d.Source, Key: d.Key, BusinessKey: d.BusinessKey,
			BusinessWindow: window, Correlations: d.Correlations, Now: clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Record(ctx, d, claim); err != nil {
			t.Fatal(err)
		}
		flags, err := db.FlagsOf(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []storage.SuspectKind{storage.SuspectBusinessKey, storage.SuspectCorrelation} {
			for what, sus := range map[string][]storage.Suspect{"intake": flags.Suspects, "the key lab": lab} {
				var got int64
				for _, x := range sus {
					if x.Kind == kind && (what != "intake" || x.Delivery == d.ID) {
						got = x.Other
					}
				}
				if got != want {
					t.Errorf("window from %d ms: %s finds the %s of %d, want %d", s, what, kind, got, want)
				}
			}
		}
	}
}
