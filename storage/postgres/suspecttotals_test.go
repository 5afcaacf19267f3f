package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// suspectTotal is the count and money of the suspects that db counts, summed over
// kinds, states and currencies, and its open suspects of ota.
func suspectTotal(t *testing.T, db *postgres.DB) (storage.Money, int64) {
	t.Helper()
	cs, err := db.SuspectCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var m storage.Money
	for _, c := range cs {
		m.Add(c.Money)
	}
	open, err := db.OpenSuspects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m, open["ota"]
}

// sqlAddSuspect adds $1 suspects of deliveries $2+1 on, each a delivery of its own.
const sqlAddSuspect = `INSERT INTO suspects (kind, delivery, source, amount, currency, flagged_at)
	SELECT 'business_key', $2::bigint + i, 'ota', '1.00', 'EUR', 0 FROM generate_series(1, $1) AS i`

// TestRollupSuspects_OutOfOrderCommit: a suspect whose transaction took its id before
// others were committed and rolled up is still counted, once, when it commits: the
// roll-up never moves its mark past an id whose transaction may still commit (the
// same fence as the deliveries' roll-ups). Without the fence the mark would pass it,
// and the counts would miss it for good.
func TestRollupSuspects_OutOfOrderCommit(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a, b := replica(t, url, now), replica(t, url, now)
	slow, err := postgrestest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(context.WithoutCancel(ctx))
	if _, err := slow.Exec(ctx, sqlAddSuspect, 1, 0); err != nil { // takes id 1, commits later
		t.Fatal(err)
	}
	if _, err := postgrestest.Connect(t, url).Exec(ctx, sqlAddSuspect, 3, 1); err != nil { // ids 2 to 4
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.RollupSuspects(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if m, open := suspectTotal(t, b); m.Count != 3 || m.Minor != 300 || open != 3 {
		t.Fatalf("before the slow commit: %+v, %d open; want 3 of 1.00", m, open)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	folded := 0
	for i := 0; ; i++ {
		n, err := b.RollupSuspects(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		folded += n
		if n == 0 && i > 0 {
			break
		}
		if i == 10 {
			t.Fatal("the roll-up does not catch up")
		}
	}
	for _, db := range []*postgres.DB{a, b} {
		if m, open := suspectTotal(t, db); m.Count != 4 || m.Minor != 400 || open != 4 {
			t.Fatalf("rolled up: %+v, %d open; want 4 of 1.00", m, open)
		}
	}
	if folded != 4 {
		t.Fatalf("the roll-ups folded %d suspects once the slow one committed, want all 4 then", folded)
	}
	// Folded in, each counts from the totals alone: reviewing one moves it there.
	if _, err := a.ReviewSuspect(ctx, 1, "olga", storage.SuspectDismissed, "no"); err != nil {
		t.Fatal(err)
	}
	if m, open := suspectTotal(t, b); m.Count != 4 || m.Minor != 400 || open != 3 {
		t.Fatalf("one dismissed: %+v, %d open; want 4 of 1.00, 3 open", m, open)
	}
}

// TestRollupSuspects_LockHeld: while another replica holds the roll-up's advisory
// lock, the roll-up folds nothing and reports 0 without an error; once it is free, it
// folds.
func TestRollupSuspects_LockHeld(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := replica(t, url, time.Now())
	if _, err := postgrestest.Connect(t, url).Exec(ctx, sqlAddSuspect, 2, 4); err != nil {
		t.Fatal(err)
	}
	tx, err := postgrestest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, postgres.LockID(db, postgres.RollupSuspectsLock)); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RollupSuspects(ctx, 10); err != nil || n != 0 {
		t.Fatalf("roll-up with the lock held elsewhere: %d, %v; want 0, nil", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RollupSuspects(ctx, 10); err != nil || n != 2 {
		t.Fatalf("roll-up with the lock free: %d, %v; want 2", n, err)
	}
}

// TestSuspectCounts_Plans: on a table of many suspects, the counts' and the open
// suspects' reads of the suspects after the mark walk the primary key from the mark
// on, as they are planned for the mark they are given; and the roll-up's read of its
// stretch does too in the generic plan PostgreSQL caches for it. Never a scan of the
// whole table, once the roll-up has caught up.
func TestSuspectCounts_Plans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many suspects")
	}
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	conn := postgrestest.Connect(t, url)
	const n = 200_000
	if _, err := conn.Exec(ctx, sqlAddSuspect, n, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE suspects`); err != nil {
		t.Fatal(err)
	}
	plan, err := db.ExplainSuspectCounts(ctx, n-1000)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(plan, "Index Scan using suspects_pkey") != 2 || strings.Contains(plan, "Seq Scan on suspects") {
		t.Errorf("the counts do not read the suspects after the mark by id:\n%s", plan)
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `PREPARE fold AS `+postgres.SQLSuspectFold); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE fold(0, 200000, 5000)`)
	if err != nil {
		t.Fatal(err)
	}
	var fold strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		fold.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := fold.String(); !strings.Contains(p, "Index Scan using suspects_pkey") || strings.Contains(p, "Seq Scan") {
		t.Errorf("the roll-up's generic plan does not walk the primary key from the mark:\n%s", p)
	}
}

// TestImport_SuspectCounts: a SQLite database whose suspects are partly rolled up and
// reviewed, before and after their fold, copies into PostgreSQL with the same counts
// and open suspects per source. The copy leaves PostgreSQL's totals empty, their mark
// at 0: it counts every suspect after the mark until its own roll-up has folded them,
// and reviews go on from there.
func TestImport_SuspectCounts(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	lite := storagetest.OpenPath(t, path, sqlite.Options{})
	var ids []int64
	for i, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Source: "ota", Amount: "100.10", Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Source: "psp", Amount: "1200", Currency: "JPY"},
		{Kind: storage.SuspectLateDuplicate, Source: "ota", Amount: "12.345", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Source: "cm", Amount: "3"},
		{Kind: storage.SuspectBusinessKey, Source: "ota", Amount: "7.00", Currency: "EUR"},
	} {
		s.Delivery = int64(i + 1)
		ids = append(ids, storagetest.AddSuspect(t, lite, s).ID)
	}
	if n, err := lite.RollupSuspects(ctx, 3); err != nil || n != 3 {
		t.Fatalf("roll-up in SQLite: %d, %v", n, err)
	}
	for _, id := range []int64{ids[0], ids[4]} { // one folded, one not
		if _, err := lite.ReviewSuspect(ctx, id, "olga", storage.SuspectConfirmed, "twice"); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(db storage.Store) string {
		t.Helper()
		cs, err := db.SuspectCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open, err := db.OpenSuspects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v %v", cs, open)
	}
	want := counts(lite)
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	pg, _, _, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(pg); got != want {
		t.Fatalf("copied, before a roll-up:\n%s\nin SQLite:\n%s", got, want)
	}
	if n, err := pg.RollupSuspects(ctx, 100); err != nil || n != len(ids) {
		t.Fatalf("roll-up after the copy: %d, %v; want every suspect folded", n, err)
	}
	if got := counts(pg); got != want {
		t.Fatalf("copied and rolled up:\n%s\nin SQLite:\n%s", got, want)
	}
	if _, err := pg.ReviewSuspect(ctx, ids[0], "olga", storage.SuspectDismissed, "not a double"); err != nil {
		t.Fatal(err)
	}
	lite = storagetest.OpenPath(t, path, sqlite.Options{})
	if _, err := lite.ReviewSuspect(ctx, ids[0], "olga", storage.SuspectDismissed, "not a double"); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(pg), counts(lite); got != want {
		t.Fatalf("the same review on both:\n%s\nin SQLite:\n%s", got, want)
	}
}
