package views

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/views/viewstest"
)

// TestCountsOfOne: a count of one reads in the singular, as "1 row", not "1 rows".
func TestCountsOfOne(t *testing.T) {
	text := func(n string) string { return strings.Join(strings.Fields(n), " ") }
	for _, tc := range []struct {
		chain AuditChain
		want  string
	}{
		{AuditChain{State: "intact", Rows: 1, UpTo: 1}, "Hash chain intact: its one row, up to row 1, chains from the first."},
		{AuditChain{State: "intact", Rows: 2, UpTo: 2}, "Hash chain intact: all 2 rows, up to row 2, chain from the first."},
		{AuditChain{State: "partial", Rows: 1, UpTo: 1}, "Hash chain intact up to row 1 (1 row); the rows after it"},
		{AuditChain{State: "broken", Rows: 1, UpTo: 1, BrokenAt: 2, Kind: "edited", Detail: "row 2 was edited"},
			"Hash chain broken at row 2 (edited). row 2 was edited. Row 1, the first, chains."},
	} {
		n := viewstest.One(t, viewstest.Render(t, auditChain(tc.chain)), "audit-chain")
		if got := text(viewstest.Text(n)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s, %d rows: %q\nwant it to begin %q", tc.chain.State, tc.chain.Rows, got, tc.want)
		}
	}
	for stored, want := range map[int]string{1: "1 is still stored", 2: "2 are still stored"} {
		n := viewstest.One(t, viewstest.Render(t, batchItems(Batch{ID: 7, Count: 3, Stored: stored})), "batch-swept")
		if got := text(viewstest.Text(n)); !strings.Contains(got, want) {
			t.Errorf("a batch of 3 with %d stored: %q; want %q", stored, got, want)
		}
	}
	for n, want := range map[int64]string{1: "1 duplicate with an amount", 2: "2 duplicates with an amount"} {
		card := viewstest.One(t, viewstest.Render(t, DashboardView(Dashboard{Totals: Totals{MoneyCount: n}})), "card-money")
		if got := text(viewstest.Text(card)); !strings.Contains(got, want) {
			t.Errorf("money card of %d: %q; want %q", n, got, want)
		}
	}
}
