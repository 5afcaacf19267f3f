package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRollup_TinyAmountStored: a delivery whose amount has a long run of zeros after
// the point is stored and counted like any other; the writer goes on storing after it.
func TestRollup_TinyAmountStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tiny.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(db)
	for i, amount := range []string{"0." + strings.Repeat("0", 30) + "1", "5"} {
		d := delivery("ota", "k", "h")
		d.Amount, d.Currency = amount, "EUR"
		if err := db.Record(ctx, d, day); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	checkFoldedIsRead(t, db, path, 1000)
}

// checkFoldedIsRead rolls db up in steps of limit and compares the totals written with
// those that reading every delivery again gives.
func checkFoldedIsRead(t *testing.T, db *sqlite.DB, path string, limit int) {
	t.Helper()
	ctx := context.Background()
	rollUp := func() {
		t.Helper()
		for {
			n, err := db.RollupStats(ctx, limit)
			if err != nil {
				t.Fatal(err)
			}
			m, err := db.RollupLedger(ctx, limit)
			if err != nil {
				t.Fatal(err)
			}
			if n < limit && m < limit {
				return
			}
		}
	}
	raw := rawDB(t, path)
	totals := func() string {
		t.Helper()
		var b strings.Builder
		for _, q := range []string{
			`SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount_minor
				FROM delivery_stats ORDER BY 1, 2, 3, 4`,
			`SELECT day, source, property, currency, kind, deliveries, amount, unsummed, no_amount FROM ledger_days ORDER BY 1, 2, 3, 4, 5`,
			`SELECT day, source, currency, kind, deliveries, amount, unsummed, no_amount FROM ledger_totals ORDER BY 1, 2, 3, 4`,
		} {
			rows, err := raw.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				v := make([]any, len(cols))
				p := make([]any, len(cols))
				for i := range v {
					p[i] = &v[i]
				}
				if err := rows.Scan(p...); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintln(&b, v...)
			}
			rows.Close()
		}
		return b.String()
	}
	before := db.TotalsRead()
	rollUp()
	folded := totals()
	foldedSome := db.TotalsRead()-before < 1
	rawExec(t, raw, `DELETE FROM delivery_stats`, `DELETE FROM ledger_days`, `DELETE FROM ledger_totals`,
		`UPDATE delivery_stats_mark SET rolled_up_to = 0`, `UPDATE ledger_mark SET rolled_up_to = 0`)
	rollUp()
	if read := totals(); read != folded {
		t.Errorf("totals folded from what the writer kept (some folded: %v):\n%s\nread from the deliveries:\n%s", foldedSome, folded, read)
	}
}

// TestRollup_AmountsThatCancel: amounts that cancel out within an hour (a charge, a
// small one, the charge refunded) total on the dashboard as SQLite's total() sums them.
func TestRollup_AmountsThatCancel(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cancel.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(db)
	for i, amount := range []string{"999999999999999", "0.01", "-999999999999999", "0.01"} {
		d := delivery("ota", fmt.Sprint("k", i), "h")
		d.Amount, d.Currency = amount, "EUR"
		if err := db.Record(ctx, d, day); err != nil {
			t.Fatal(err)
		}
	}
	checkFoldedIsRead(t, db, path, 1000)
}

// TestRollup_WhileTheWriterStores: deliveries of every kind that the writer turns into
// duplicates in the transaction that stores them (business keys that block, items of
// one batch sharing a key, money mismatches), rejections of known and unknown sources,
// stored while two roll-ups run at once in small steps: the totals are those that
// reading every delivery gives.
func TestRollup_WhileTheWriterStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	c := newClock(db)
	blocks := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	done := make(chan struct{})
	var rollups sync.WaitGroup
	for g := range 2 {
		rollups.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := db.RollupStats(ctx, 7+g*13); err != nil {
					t.Error(err)
					return
				}
				if _, err := db.RollupLedger(ctx, 3+g*5); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 150 {
				n := g*1000 + i
				var err error
				switch n % 6 {
				case 0: // a business key met before: blocked, a duplicate
					d := bk("ota", fmt.Sprint("evt-", n), fmt.Sprint("B", n%11))
					d.Amount = []string{"80.00", "12.5", "", "1e3"}[n%4]
					err = db.Record(ctx, d, blocks)
				case 1: // a batch whose items share keys, amounts differing
					var items []*storage.Delivery
					for j := range 4 {
						d := delivery("pay", fmt.Sprint("b", n%17, "-", j%2), fmt.Sprint("h", j))
						d.Amount, d.Currency, d.Property = fmt.Sprint(j+1, ".25"), "USD", fmt.Sprint("p", j)
						items = append(items, d)
					}
					err = db.RecordBatch(ctx, items, day)
				case 2:
					err = db.Record(ctx, &storage.Delivery{Source: fmt.Sprint("junk-", n%5), Outcome: storage.Rejected,
						Status: storage.StatusUnknownSource, Amount: "3"}, day)
				case 3:
					err = db.Record(ctx, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401}, day)
				default: // redeliveries, some with another amount: money mismatches
					d := delivery("ota", fmt.Sprint("r", n%29), fmt.Sprint("h", n%3))
					d.Amount, d.Currency, d.Property = fmt.Sprint(n%3, ".10"), "EUR", "p1"
					err = db.Record(ctx, d, day)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if g == 0 && i%50 == 49 {
					c.Add(40 * time.Minute)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rollups.Wait()
	checkFoldedIsRead(t, db, path, 50)
}

// TestRollup_AnotherProcess: another process (a command, or an older build) stores
// deliveries between the writer's and rolls up a stretch that ends inside what the
// writer kept; the serve's roll-up reads what it did not store, and the totals are
// those that reading every delivery gives.
func TestRollup_AnotherProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "two.db")
	serve := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(serve)
	other := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(other)
	for i := range 300 {
		db := serve
		if i%40 >= 30 {
			db = other
		}
		d := delivery("ota", fmt.Sprint("k", i%23), fmt.Sprint("h", i%2))
		d.Amount, d.Currency, d.Property = fmt.Sprint(i, ".5"), "EUR", fmt.Sprint("p", i%3)
		if err := db.Record(ctx, d, day); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			if _, err := other.RollupStats(ctx, 45); err != nil {
				t.Fatal(err)
			}
			if _, err := other.RollupLedger(ctx, 19); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkFoldedIsRead(t, serve, path, 1000)
}
