package sqlite_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_SuspectTotalsAfterAnOlderRelease: an operator upgrades (migration 0021, the
// roll-up folds the suspects), goes back to the previous release for a while and
// reviews a suspect there, then upgrades again. Releases before this one open a schema
// newer than they know without a word, and the previous release's review is a bare
// UPDATE of the suspect, as below, which leaves the running totals as they were: the
// trigger of 0021 then empties them, so that the counts and the open-suspects alert
// read every suspect as it is, before the roll-up and after it folds them all again.
func TestDB_SuspectTotalsAfterAnOlderRelease(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	path := db.Path()
	var ids []int64
	for i := range 2 {
		s := storagetest.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: int64(i + 1),
			Source: "ota", Amount: "10.00", Currency: "EUR"})
		ids = append(ids, s.ID)
	}
	if n, err := db.RollupSuspects(ctx, 100); err != nil || n != 2 {
		t.Fatalf("roll-up: %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The previous release's ReviewSuspect (bb1d231, storage/sqlite/review.go), word
	// for word.
	execFile(t, path, fmt.Sprintf(`UPDATE suspects SET state = 'dismissed', reviewed_by = 'olga', reviewed_at = 1,
		reason = 'not a double' WHERE id = %d`, ids[0]))

	db, err := sqlite.Open(path, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkOneDismissed(t, db, "before the roll-up")
	if n, err := db.RollupSuspects(ctx, 100); err != nil || n != 2 {
		t.Fatalf("roll-up after the older release: %d, %v; want both folded again", n, err)
	}
	checkOneDismissed(t, db, "folded again")
}

func checkOneDismissed(t *testing.T, db *sqlite.DB, when string) {
	t.Helper()
	ctx := context.Background()
	open, err := db.OpenSuspects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if open["ota"] != 1 {
		t.Errorf("%s: open suspects of ota: %d, want 1 (the other was dismissed)", when, open["ota"])
	}
	cs, err := db.SuspectCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%+v", []storage.SuspectCount{
		{Kind: storage.SuspectBusinessKey, State: storage.SuspectDismissed, Currency: "EUR", Suspects: 1, Money: storage.Money{Count: 1, Minor: 1000}},
		{Kind: storage.SuspectBusinessKey, State: storage.SuspectOpen, Currency: "EUR", Suspects: 1, Money: storage.Money{Count: 1, Minor: 1000}},
	}); fmt.Sprintf("%+v", cs) != want {
		t.Errorf("%s: suspect counts:\n%+v\nwant\n%s", when, cs, want)
	}
}
