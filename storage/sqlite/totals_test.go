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

// TestRollup_FoldsWhatTheWriterStored: the roll-ups fold what the writer kept of the
// deliveries it stored instead of reading them back, and the totals they write are the
// ones reading every delivery gives: accepted, duplicates (mismatched, money
// mismatches), rejections of known and unknown sources, amounts the writer cannot
// total, several hours and days, rolled up in small steps.
func TestRollup_FoldsWhatTheWriterStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "totals.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	c := newClock(db)
	record := func(round, n int, amounts []string) {
		t.Helper()
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := g; i < n; i += 16 {
					key := fmt.Sprintf("r%d-k%d", round, i%37)
					hash := "h"
					if i%5 == 0 {
						hash = fmt.Sprint("h", i) // a duplicate of it is a mismatch
					}
					d := delivery("ota", key, hash)
					d.Property, d.Currency = fmt.Sprint("p", i%4), []string{"EUR", "USD", ""}[i%3]
					d.Amount = amounts[i%len(amounts)]
					switch i % 23 {
					case 7:
						d = &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401}
					case 11:
						d = &storage.Delivery{Source: fmt.Sprint("junk-", i), Outcome: storage.Rejected,
							Status: storage.StatusUnknownSource}
					}
					if err := db.Record(ctx, d, day); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	rollUp := func(limit int) {
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

	// Amounts the writer totals itself: it keeps them all, and the roll-up reads nothing.
	record(0, 1000, []string{"412.50", "0.1", "", "-3", "100.25"})
	rollUp(5000)
	if read := db.TotalsRead(); read > 100 {
		t.Errorf("the roll-ups read %d of 1000 deliveries; want them folded from what the writer kept", read)
	}
	// Amounts it leaves to SQLite, over two hours and a day, rolled up in small steps
	// that end inside what the writer kept.
	c.Add(90 * time.Minute)
	record(1, 600, []string{"412.50", "12,50", "1e3", "abc", "7"})
	c.Add(24 * time.Hour)
	record(2, 600, []string{"0.07", "3", ""})
	rollUp(97)

	raw := rawDB(t, path)
	totals := func() string {
		t.Helper()
		var b strings.Builder
		for _, q := range []string{
			`SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount_minor
				FROM delivery_stats ORDER BY 1, 2, 3, 4`,
			`SELECT day, source, property, currency, kind, deliveries, amount, unsummed, no_amount, 0, 0 FROM ledger_days ORDER BY 1, 2, 3, 4, 5`,
			`SELECT day, source, currency, kind, deliveries, amount, unsummed, no_amount, 0, 0 FROM ledger_totals ORDER BY 1, 2, 3, 4`,
			// The ledger's mark is left out: reading, it stops at the last duplicate; folding,
			// at the last delivery of a span. Either says every duplicate up to it is counted.
			`SELECT rolled_up_to FROM delivery_stats_mark`,
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
	folded := totals()
	if !strings.Contains(folded, "money_mismatch") || !strings.Contains(folded, "rejected") {
		t.Fatalf("the deliveries made no money mismatch or no rejection: the test checks less than it says\n%s", folded)
	}

	// The same deliveries counted by reading them all.
	rawExec(t, raw, `DELETE FROM delivery_stats`, `DELETE FROM ledger_days`, `DELETE FROM ledger_totals`,
		`UPDATE delivery_stats_mark SET rolled_up_to = 0`, `UPDATE ledger_mark SET rolled_up_to = 0`)
	before := db.TotalsRead()
	rollUp(5000)
	if db.TotalsRead() == before {
		t.Fatal("the second roll-up read nothing: it did not count by reading")
	}
	if read := totals(); read != folded {
		t.Errorf("totals folded from what the writer kept:\n%s\nread from the deliveries:\n%s", folded, read)
	}
}
