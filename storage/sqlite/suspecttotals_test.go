package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_SuspectCountsPlans: the suspects' counts and the open suspects' alert read
// the running totals and the suspects after the mark through their ids: no step scans
// the suspects table, whose size grows with every flag ever raised.
func TestDB_SuspectCountsPlans(t *testing.T) {
	db := storagetest.Open(t)
	plan, err := db.ExplainSuspectCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "SCAN suspects") || strings.Contains(plan, "SCAN s\n") || strings.Contains(plan, "SCAN o\n") ||
		strings.Count(plan, " USING INTEGER PRIMARY KEY (rowid>?)") != 2 {
		t.Errorf("the counts do not read the suspects after the mark by id:\n%s", plan)
	}
	// Whether an earlier suspect of its delivery, kind and state counts a suspect's
	// money already is looked up by delivery, a few rows.
	if !strings.Contains(plan, "SEARCH o USING INDEX suspects_delivery") {
		t.Errorf("a suspect's earlier ones are not found by its delivery:\n%s", plan)
	}
}

// TestDB_SuspectCountsLargeTail: a database with many suspects and none folded (one
// from before the running totals) counts them all exactly, and the roll-up, called
// as serve calls it, catches up in bounded stretches, the counts exact throughout.
func TestDB_SuspectCountsLargeTail(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	const n = 30_000
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
INSERT INTO suspects (kind, delivery, source, amount, currency, flagged_at, state)
SELECT 'business_key', n, 'src' || (n % 3), (n % 100) || '.25', 'EUR', 0,
	CASE WHEN n % 4 = 0 THEN 'dismissed' ELSE 'open' END FROM i`, n); err != nil {
		t.Fatal(err)
	}
	// By hand: n/4 dismissed, the rest open; amounts (n % 100) + 0.25.
	want := map[string]storage.Money{}
	open := map[string]int64{}
	for i := 1; i <= n; i++ {
		state := storage.SuspectOpen
		if i%4 == 0 {
			state = storage.SuspectDismissed
		} else {
			open[fmt.Sprint("src", i%3)]++
		}
		m := want[state]
		m.AddAmount(fmt.Sprintf("%d.25", i%100), "EUR")
		want[state] = m
	}
	check := func(when string) {
		t.Helper()
		cs, err := db.SuspectCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 2 || cs[0].Money != want[cs[0].State] || cs[1].Money != want[cs[1].State] {
			t.Fatalf("%s: counts %+v, want %+v", when, cs, want)
		}
		got, err := db.OpenSuspects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(open) {
			t.Fatalf("%s: open suspects %v, want %v", when, got, open)
		}
	}
	check("none folded")
	const batch = 5000
	calls := 0
	for {
		k, err := db.RollupSuspects(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if calls == 3 {
			check("part folded")
		}
		if k < batch {
			break
		}
	}
	if calls != n/batch+1 {
		t.Errorf("caught up in %d calls, want %d", calls, n/batch+1)
	}
	check("all folded")
}
