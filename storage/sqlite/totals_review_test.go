package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestCastReal_LongFractions: an amount with many digits after the point, most of them
// leading zeros, is a plain decimal an event may carry; castReal either totals it as
// SQLite's CAST does or leaves it to SQLite, and never fails on it.
func TestCastReal_LongFractions(t *testing.T) {
	raw, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, amount := range []string{
		"0." + strings.Repeat("0", 22) + "1", "0." + strings.Repeat("0", 23) + "1",
		"-0." + strings.Repeat("0", 40) + "5", "0." + strings.Repeat("0", 30),
		"000." + strings.Repeat("0", 25) + "123456789012345",
	} {
		got, ok := func() (v float64, ok bool) {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("castReal(%q) panics: %v", amount, p)
				}
			}()
			return sqlite.CastReal(amount)
		}()
		var want float64
		if err := raw.QueryRow(`SELECT CAST(? AS REAL)`, amount).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if ok && got != want {
			t.Errorf("castReal(%q) = %v; SQLite's CAST gives %v", amount, got, want)
		}
	}
}

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
			`SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, printf('%.6f', amount)
				FROM delivery_stats ORDER BY 1, 2, 3, 4`,
			`SELECT day, source, property, currency, kind, deliveries, amount, unsummed FROM ledger_days ORDER BY 1, 2, 3, 4, 5`,
			`SELECT day, source, currency, kind, deliveries, amount, unsummed FROM ledger_totals ORDER BY 1, 2, 3, 4`,
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
