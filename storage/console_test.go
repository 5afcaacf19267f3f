package storage_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// MustRecordEvent records a delivery with business fields at the test clock's now.
func MustRecordEvent(tb testing.TB, db *storage.DB, source, key, hash, property, booking, status, amount string) *storage.Delivery {
	tb.Helper()
	d := delivery(source, key, hash)
	d.Property, d.Booking, d.EventStatus, d.Amount = property, booking, status, amount
	return storagetest.Record(tb, db, d, day)
}

func ids(ds []storage.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestDB_Events(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	start := c.Now()
	var all []*storage.Delivery
	for i := range 30 {
		prop := []string{"HTL-A", "HTL-B", "HTL-C"}[i%3]
		status := "confirmed"
		amount := ""
		if i%5 == 0 {
			status, amount = "cancelled", fmt.Sprintf("%d.50", 100+i)
		}
		all = append(all, MustRecordEvent(t, db, "ota", fmt.Sprintf("evt_%d", i), "h", prop, fmt.Sprintf("BK-%d", i), status, amount))
		c.Add(time.Minute)
	}
	// A duplicate of evt_5 with another payload, one of evt_0 with the same, a rejection
	// and another source reusing a key.
	dupMismatch := MustRecordEvent(t, db, "ota", "evt_5", "h2", "HTL-C", "BK-5", "cancelled", "120.50")
	dupSame := MustRecordEvent(t, db, "ota", "evt_0", "h", "HTL-A", "BK-0", "cancelled", "100.50")
	rejected := storagetest.Record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature: no"}, day)
	other := MustRecordEvent(t, db, "cm", "evt_5", "x", "HTL-A", "BK-99", "confirmed", "")

	page := func(f storage.EventFilter) storage.EventPage {
		t.Helper()
		p, err := db.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("NewestFirstWithKeysetPages", func(t *testing.T) {
		var got []int64
		f := storage.EventFilter{Limit: 7}
		for {
			p := page(f)
			got = append(got, ids(p.Events)...)
			if p.Next == 0 {
				break
			}
			f.Before = p.Next
		}
		if len(got) != 34 || got[0] != other.ID || got[33] != all[0].ID {
			t.Fatalf("got %d ids %v, want all 34 newest first", len(got), got)
		}
		for i := 1; i < len(got); i++ {
			if got[i] >= got[i-1] {
				t.Fatalf("not strictly descending at %d: %v", i, got)
			}
		}
	})
	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    storage.EventFilter
			want []int64
		}{
			{"Source", storage.EventFilter{Source: "cm"}, []int64{other.ID}},
			{"Outcome", storage.EventFilter{Outcome: storage.Duplicate}, []int64{dupSame.ID, dupMismatch.ID}},
			{"Rejected", storage.EventFilter{Outcome: storage.Rejected, Source: "ota"}, []int64{rejected.ID}},
			{"Mismatch", storage.EventFilter{Mismatch: true}, []int64{dupMismatch.ID}},
			{"Booking", storage.EventFilter{Booking: "BK-5"}, []int64{dupMismatch.ID, all[5].ID}},
			{"BookingAndOutcome", storage.EventFilter{Booking: "BK-5", Outcome: storage.Duplicate}, []int64{dupMismatch.ID}},
			{"KeyAnySource", storage.EventFilter{Key: "evt_5", KeySources: []string{"ota", "cm"}}, []int64{other.ID, dupMismatch.ID, all[5].ID}},
			{"KeyOneSource", storage.EventFilter{Key: "evt_5", Source: "cm"}, []int64{other.ID}},
			{"KeyNoSources", storage.EventFilter{Key: "evt_0"}, []int64{dupSame.ID, all[0].ID}},
			{"PropertyStatus", storage.EventFilter{Property: "HTL-A", Status: "cancelled", Source: "ota"}, []int64{dupSame.ID, all[15].ID, all[0].ID}},
			{"TimeRange", storage.EventFilter{From: start.Add(10 * time.Minute), To: start.Add(13 * time.Minute)}, []int64{all[12].ID, all[11].ID, all[10].ID}},
			{"Nothing", storage.EventFilter{Booking: "BK-404"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := ids(page(tc.f).Events)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
	})
	t.Run("EachEvent", func(t *testing.T) {
		n := 0
		err := db.EachEvent(ctx, storage.EventFilter{Source: "ota", Status: "cancelled"}, func(d storage.Delivery) error {
			if d.EventStatus != "cancelled" || d.Source != "ota" {
				t.Errorf("unexpected %+v", d)
			}
			n++
			return nil
		})
		if err != nil || n != 8 {
			t.Fatalf("EachEvent: %d rows, err %v; want 8", n, err)
		}
	})
}

func TestDB_Events_ScanWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("records many deliveries")
	}
	ctx := context.Background()
	db := storagetest.Open(t)
	newClock(db)
	// One match far below a window of non-matching rows: the first page stops at the
	// window's end and says so; following Next finds the match.
	match := MustRecordEvent(t, db, "ota", "old", "h", "P", "B", "no-show", "")
	done := make(chan error, 64)
	for w := range 64 {
		go func() {
			var err error
			for i := range storage.ScanWindow/64 + 10 {
				d := delivery("ota", fmt.Sprintf("k%d-%d", w, i), "h")
				d.EventStatus = "confirmed"
				if err = db.Record(ctx, d, day); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 64 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f := storage.EventFilter{Status: "no-show"}
	p, err := db.Events(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 0 || !p.Partial || p.Next == 0 {
		t.Fatalf("first page: %d events, partial %v, next %d; want an empty partial page", len(p.Events), p.Partial, p.Next)
	}
	f.Before = p.Next
	if p, err = db.Events(ctx, f); err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 1 || p.Events[0].ID != match.ID || p.Next != 0 {
		t.Fatalf("second page: %v next %d, want the match and the end", ids(p.Events), p.Next)
	}
}

// TestDB_Keys_ScanWindow checks that a keys listing that checks each claim (here a
// source with one old key below many of another) searches a bounded stretch of claims
// per page and says so, that following Next finds what lies below, that listings with
// matches in reach are unaffected, and that ListKeys (bulk releases) stays exhaustive.
func TestDB_Keys_ScanWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	rare := MustRecordEvent(t, db, "rare", "old", "h", "P", "B", "cancelled", "")
	err := db.BulkLoadForBench(ctx, storage.BenchFill{Source: "ota", Keys: storage.ScanWindow + 10,
		ClaimedAt: c.Now(), TTL: 24 * time.Hour, Headers: "{}",
		Key:  func(i int) string { return fmt.Sprintf("k%06d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(ks []storage.Claim) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Source+"/"+k.Key)
		}
		return out
	}

	f := storage.KeyFilter{Source: "rare"}
	p, err := db.Keys(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 0 || !p.Partial || p.Next == 0 {
		t.Fatalf("first page: %v, partial %v, next %d; want an empty partial page", keys(p.Keys), p.Partial, p.Next)
	}
	f.AfterID = p.Next
	if p, err = db.Keys(ctx, f); err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 1 || p.Keys[0].Key != rare.Key || p.Next != 0 || p.Partial {
		t.Fatalf("second page: %v, partial %v, next %d; want the rare key and the end", keys(p.Keys), p.Partial, p.Next)
	}

	for _, f := range []storage.KeyFilter{{Limit: 10}, {Source: "ota", Limit: 10}, {State: storage.StateProcessed, Limit: 10}} {
		p, err := db.Keys(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Keys) != 10 || p.Partial || p.Next != p.Keys[9].ID || p.Keys[0].Key != fmt.Sprintf("k%06d", storage.ScanWindow+9) {
			t.Errorf("%+v: %v, partial %v, next %d; want the 10 newest keys and a next page", f, keys(p.Keys), p.Partial, p.Next)
		}
	}

	all, err := db.ListKeys(ctx, storage.KeyFilter{Source: "rare"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Key != rare.Key {
		t.Fatalf("ListKeys: %v, want the rare key", keys(all))
	}
}

func TestDB_FirstKeyDeliveries(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	newClock(db)
	var want []int64
	for i := range 5 {
		want = append(want, MustRecordEvent(t, db, "ota", "evt_many", fmt.Sprint("h", i), "P", "B", "cancelled", "").ID)
	}
	MustRecordEvent(t, db, "cm", "evt_many", "h", "P", "B", "cancelled", "") // another source's key
	for _, tc := range []struct {
		limit int
		ids   []int64
		more  bool
	}{{3, want[:3], true}, {4, want[:4], true}, {5, want, false}, {9, want, false}, {-1, want, false}} {
		ds, more, err := db.FirstKeyDeliveries(ctx, "ota", "evt_many", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(ds), tc.ids) || more != tc.more {
			t.Errorf("limit %d: %v more %v, want %v more %v", tc.limit, ids(ds), more, tc.ids, tc.more)
		}
	}
}

// TestDB_Events_Plans checks that each filter of the events list, and the deliveries of
// one key, are answered through an index: no step of their plans scans the table.
func TestDB_Events_Plans(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	for _, tc := range []struct {
		name  string
		f     storage.EventFilter
		index string
	}{
		{"None", storage.EventFilter{}, "INTEGER PRIMARY KEY"},
		{"Source", storage.EventFilter{Source: "ota"}, "deliveries_source_id"},
		{"Outcome", storage.EventFilter{Outcome: storage.Duplicate}, "deliveries_outcome_id"},
		{"SourceOutcome", storage.EventFilter{Source: "ota", Outcome: storage.Duplicate}, "deliveries_source_id"},
		{"Mismatch", storage.EventFilter{Mismatch: true, Source: "ota"}, "deliveries_mismatch"},
		{"Property", storage.EventFilter{Property: "HTL-A", Status: "cancelled"}, "INTEGER PRIMARY KEY"},
		{"Accepted", storage.EventFilter{Outcome: storage.Accepted}, "INTEGER PRIMARY KEY"},
		{"RejectedProperty", storage.EventFilter{Outcome: storage.Rejected, Property: "HTL-A"}, "deliveries_outcome_id"},
		{"Booking", storage.EventFilter{Booking: "BK-1", Source: "ota", Outcome: storage.Duplicate}, "deliveries_booking"},
		{"Key", storage.EventFilter{Key: "evt_1", KeySources: []string{"ota", "cm"}}, "deliveries_key"},
		{"Status", storage.EventFilter{Status: "cancelled"}, "INTEGER PRIMARY KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := db.ExplainEvents(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tc.index) {
				t.Errorf("plan does not use %s:\n%s", tc.index, plan)
			}
			for line := range strings.SplitSeq(plan, "\n") {
				if strings.HasPrefix(line, "SCAN deliveries") && !strings.Contains(line, "USING") {
					t.Errorf("plan scans the table:\n%s", plan)
				}
			}
			t.Logf("%s", plan)
		})
	}
	plan, err := db.ExplainKeyDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "deliveries_key") {
		t.Errorf("key deliveries plan:\n%s", plan)
	}
	// The keys listings walk the claims newest first or read claims_unsettled; none may
	// read a whole source's claims through the UNIQUE index to sort them.
	for _, f := range []storage.KeyFilter{{}, {Source: "ota"}, {State: storage.StateProcessed},
		{Source: "ota", State: storage.StateReleased, AfterID: 5}, {State: storage.StateFailed},
		{Source: "ota", State: storage.StateProcessing}, {Stuck: true}, {Stuck: true, Source: "ota", AfterID: 5}} {
		for _, window := range []bool{false, true} {
			plan, err := db.ExplainKeys(ctx, f, window)
			if err != nil {
				t.Fatal(err)
			}
			tab := !f.Stuck && (f.State == storage.StateFailed || f.State == storage.StateProcessing)
			released := f.State == storage.StateReleased
			if strings.Contains(plan, "autoindex") || f.Stuck != regexp.MustCompile(`\bclaims_unsettled\b`).MatchString(plan) ||
				tab != strings.Contains(plan, "claims_unsettled_id") || released != strings.Contains(plan, "claims_released") {
				t.Errorf("keys plan for %+v (window %v):\n%s", f, window, plan)
			}
			// Every listing comes in its index's order: a sort would read every unsettled
			// key to show the processing and failed tabs.
			if strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("keys plan for %+v sorts:\n%s", f, plan)
			}
			// Keys bounds a walk that checks each claim to a window of ids.
			walk := !f.Stuck && !tab && !released && (f.Source != "" || f.State != "")
			if window && walk && (!strings.Contains(plan, "rowid>? AND rowid<?") || !strings.Contains(plan, "rowid<?)\n")) {
				t.Errorf("keys plan for %+v does not keep to its window:\n%s", f, plan)
			}
		}
	}
	// The stuck-keys count runs every 15 s and on the dashboard: it must read the
	// unsettled keys only, and from an index alone: not every claim, nor each unsettled
	// claim's row, nor a sort to group them.
	plan, err = db.ExplainStuckCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "COVERING INDEX claims_stuck") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("stuck counts plan:\n%s", plan)
	}
}

func TestDB_DeliveryStats(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	from := c.Now().Truncate(time.Hour)
	MustRecordEvent(t, db, "ota", "a", "h", "P", "B1", "cancelled", "100.25")
	MustRecordEvent(t, db, "ota", "a", "h2", "P", "B1", "cancelled", "110.25") // duplicate, mismatch
	c.Add(2 * time.Hour)
	MustRecordEvent(t, db, "ota", "b", "h", "P", "B2", "cancelled", "50")
	MustRecordEvent(t, db, "ota", "b", "h", "P", "B2", "cancelled", "50")
	if n, err := db.RollupStats(ctx, 3); err != nil || n != 3 {
		t.Fatalf("first roll-up: %d, %v; want 3", n, err)
	}
	storagetest.Record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400}, day)
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 2 {
		t.Fatalf("second roll-up: %d, %v; want the 2 left", n, err)
	}
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 0 {
		t.Fatalf("third roll-up: %d, %v; want nothing left", n, err)
	}

	got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range got {
		fmt.Fprintf(&b, "%s %s %s n=%d mm=%d amt=%d/%.2f\n", s.Start.Sub(from), s.Source, s.Outcome, s.Deliveries, s.Mismatches, s.WithAmount, s.Amount)
	}
	want := `0s ota accepted n=1 mm=0 amt=1/100.25
0s ota duplicate n=1 mm=1 amt=1/110.25
2h0m0s ota accepted n=1 mm=0 amt=1/50.00
2h0m0s ota duplicate n=1 mm=0 amt=1/50.00
2h0m0s ota rejected n=1 mm=0 amt=0/0.00
`
	if b.String() != want {
		t.Fatalf("stats:\n%s\nwant:\n%s", b.String(), want)
	}
	dups, err := db.RecentDuplicates(ctx, from, 10)
	if err != nil || len(dups) != 2 || dups[0].Amount != "50" {
		t.Fatalf("recent duplicates = %v, %v", dups, err)
	}
}

func TestDB_LoginThrottle(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	pair := storage.Throttle{Free: 3, First: time.Second, Max: time.Minute, Forget: time.Hour}
	addr := storage.Throttle{Free: 20, First: time.Second, Max: time.Minute, Forget: time.Hour}
	policy := map[string]storage.Throttle{"pair:10.0.0.1 ana": pair, "addr:10.0.0.1": addr}
	// attempt reserves a check and returns how long it must wait instead (0: it may go on,
	// and counts as a failure unless it succeeds).
	attempt := func() time.Duration {
		t.Helper()
		until, err := db.LoginAttempt(ctx, c.Now(), policy)
		if err != nil {
			t.Fatal(err)
		}
		if until.IsZero() {
			return 0
		}
		return until.Sub(c.Now())
	}
	for i := range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("waits %v after %d failures", d, i)
		}
	}
	// Each further failure doubles the wait, up to Max; the wait runs from the failure,
	// and a refused attempt counts for nothing.
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		if d := attempt(); d != want {
			t.Fatalf("wait %v, want %v", d, want)
		}
		c.Add(want / 2)
		if d := attempt(); d != want/2 {
			t.Fatalf("half-way: wait %v, want %v", d, want/2)
		}
		c.Add(want / 2)
		if d := attempt(); d != 0 {
			t.Fatalf("after the wait: %v", d)
		}
	}
	// An hour without failures and the count starts again.
	c.Add(time.Hour)
	for range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("after Forget: %v", d)
		}
	}
	if d := attempt(); d != time.Second {
		t.Fatalf("wait %v, want 1s", d)
	}
	// A success clears the pair and takes its attempt off the address's count.
	c.Add(time.Second)
	if d := attempt(); d != 0 {
		t.Fatal(d)
	}
	if err := db.LoginSucceeded(ctx, "pair:10.0.0.1 ana", "addr:10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("after a success: %v", d)
		}
	}
	if got := (storage.Throttle{Free: 3, First: time.Second, Max: 15 * time.Minute}).Wait(1000); got != 15*time.Minute {
		t.Fatalf("Wait(1000) = %v", got)
	}
}

// TestDB_LoginAttemptConcurrent sends a burst of attempts at once: each is counted
// before the next is checked, so no more than the free ones go through.
func TestDB_LoginAttemptConcurrent(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	policy := map[string]storage.Throttle{"pair:10.0.0.1 ana": {Free: 3, First: time.Minute, Max: time.Hour, Forget: time.Hour}}
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			until, err := db.LoginAttempt(ctx, c.Now(), policy)
			if err != nil {
				t.Error(err)
			}
			if until.IsZero() {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := passed.Load(); n != 3 {
		t.Fatalf("%d of 50 concurrent attempts went through, want 3", n)
	}
}

func TestDB_UsersAndAudit(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	for _, n := range []string{"zoe", "ana"} {
		if _, err := db.CreateUser(ctx, storage.User{Name: n, Role: storage.RoleViewer, PasswordHash: "x"}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	us, err := db.Users(ctx)
	if err != nil || len(us) != 2 || us[0].Name != "ana" || us[0].PasswordHash != "" {
		t.Fatalf("users = %+v, %v", us, err)
	}
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota"}); err != nil {
		t.Fatal(err)
	}
	// Newest first: the reveal, then each user added, by whom.
	log, err := db.AuditLog(ctx, 0, 10)
	if err != nil || len(log) != 3 || log[0].Action != "reveal secret" ||
		log[1].Action != "add user" || log[1].Reason != "ana as viewer" || log[1].Actor != "test" || log[2].Reason != "zoe as viewer" {
		t.Fatalf("audit = %+v, %v", log, err)
	}
}

// TestDB_Events_AtScale times the events list's filters on a large table and logs the
// figures (run it with -v); it fails only if a query fails. It runs only
// when HOOKDEDUP_SCALE names a row count (e.g. 5000000) and HOOKDEDUP_SCALE_DB a file
// to fill (kept between runs: filling takes minutes).
func TestDB_Events_AtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HOOKDEDUP_SCALE"))
	path := os.Getenv("HOOKDEDUP_SCALE_DB")
	if n == 0 || path == "" {
		t.Skip("set HOOKDEDUP_SCALE and HOOKDEDUP_SCALE_DB to run")
	}
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	db := storagetest.OpenPath(t, path, storage.Options{})
	var have int
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRow(`SELECT count(*) FROM deliveries`).Scan(&have); err != nil {
		t.Fatal(err)
	}
	if have < n {
		t0 := time.Now()
		// Deliveries every 500 ms; one in seven a duplicate, one in fifty rejected, one in
		// 211 a mismatch; five properties; two deliveries per booking; 400-byte bodies.
		_, err := raw.Exec(`
INSERT INTO deliveries (source, received_at, outcome, status, key, key_method, payload_hash, mismatch,
	property, booking, event_status, amount, headers, body)
WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i < ?)
SELECT CASE i % 10 WHEN 0 THEN 'pms' ELSE 'ota' END, ? + i * 500,
	CASE WHEN i % 50 = 0 THEN 'rejected' WHEN i % 7 = 0 THEN 'duplicate' ELSE 'accepted' END, 200,
	'evt_' || (i / 2), 'event_id', 'h', i % 211 = 0, 'HTL-' || (i % 5), 'BK-' || (i / 2),
	CASE i % 3 WHEN 0 THEN 'cancelled' ELSE 'confirmed' END, CASE WHEN i % 3 = 0 THEN '120.50' ELSE '' END,
	'{}', randomblob(400)
FROM s`, have+1, n, start.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("filled %d deliveries in %s", n-have, time.Since(t0))
	}
	var maxID int64
	raw.QueryRow(`SELECT max(id) FROM deliveries`).Scan(&maxID)
	mid := start.Add(time.Duration(n/2) * 500 * time.Millisecond)
	sources := []string{"ota", "pms"}
	for _, tc := range []struct {
		name string
		f    storage.EventFilter
	}{
		{"None", storage.EventFilter{}},
		{"NoneDeep", storage.EventFilter{Before: maxID / 2}},
		{"Source", storage.EventFilter{Source: "pms"}},
		{"Outcome", storage.EventFilter{Outcome: storage.Rejected}},
		{"SourceOutcome", storage.EventFilter{Source: "pms", Outcome: storage.Duplicate}},
		{"Mismatch", storage.EventFilter{Mismatch: true}},
		{"Property", storage.EventFilter{Property: "HTL-3"}},
		{"PropertyRare", storage.EventFilter{Property: "HTL-404"}},
		{"Booking", storage.EventFilter{Booking: fmt.Sprint("BK-", n/3)}},
		{"BookingMissing", storage.EventFilter{Booking: "BK-none"}},
		{"Status", storage.EventFilter{Status: "cancelled"}},
		{"StatusRare", storage.EventFilter{Status: "no-show"}},
		{"Key", storage.EventFilter{Key: fmt.Sprint("evt_", n/4), KeySources: sources}},
		{"TimeRange", storage.EventFilter{From: mid, To: mid.Add(time.Hour)}},
		{"TimeRangeStatus", storage.EventFilter{From: mid, To: mid.Add(time.Hour), Status: "cancelled", Outcome: storage.Duplicate}},
	} {
		t0 := time.Now()
		p, err := db.Events(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		// Reported, not asserted: the machines are shared, and a cold first query once
		// took 695 ms. The plans are pinned by TestDB_Events_Plans.
		over := ""
		if took > 100*time.Millisecond {
			over = "  over the 100 ms target"
		}
		t.Logf("%-16s %3d rows next=%-8d partial=%-5v %s%s", tc.name, len(p.Events), p.Next, p.Partial, took, over)
	}
	t0 := time.Now()
	ds, err := db.KeyDeliveries(ctx, "ota", fmt.Sprint("evt_", n/4+1))
	t.Logf("KeyDeliveries    %3d rows %s (%v)", len(ds), time.Since(t0), err)
	t0 = time.Now()
	rolled := 0
	for {
		n, err := db.RollupStats(ctx, 50000)
		if err != nil {
			t.Fatal(err)
		}
		if rolled += n; n < 50000 {
			break
		}
	}
	t.Logf("RollupStats      %d rows %s", rolled, time.Since(t0))
	t0 = time.Now()
	stats, err := db.DeliveryStats(ctx, start, start.Add(30*24*time.Hour), 24*time.Hour)
	t.Logf("DeliveryStats    %3d rows %s (%v)", len(stats), time.Since(t0), err)
	t0 = time.Now()
	dups, err := db.RecentDuplicates(ctx, start.Add(25*24*time.Hour), 10)
	t.Logf("RecentDuplicates %3d rows %s (%v)", len(dups), time.Since(t0), err)
}

// TestDB_RollupStats_Concurrent checks that calls racing over the same deliveries count
// each of them once: the counting reads outside the write transaction, so two calls can
// count the same stretch, and only the one that moves the mark may add its counts.
func TestDB_RollupStats_Concurrent(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	from := c.Now().Truncate(time.Hour)
	const events = 300
	for i := range events {
		MustRecordEvent(t, db, "ota", fmt.Sprint("k", i), "h", "P", "B", "cancelled", "1")
	}
	// Each call stops at its first 0: caught up, or it lost a race to a call that then
	// goes on, so the last winner always finishes the stretch.
	var wg sync.WaitGroup
	var folded atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				n, err := db.RollupStats(ctx, 7)
				if err != nil {
					t.Error(err)
				}
				if n == 0 || err != nil {
					return
				}
				folded.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if n, err := db.RollupStats(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("roll-up after the racing calls: %d, %v; want nothing left", n, err)
	}
	got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, s := range got {
		counted += s.Deliveries
	}
	if counted != events || folded.Load() != events {
		t.Fatalf("stats count %d deliveries, calls reported %d folded; want %d each", counted, folded.Load(), events)
	}
}
