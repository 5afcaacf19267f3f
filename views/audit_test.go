package views

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/views/viewstest"
)

// TestAuditChain renders each state of the hash chain.
func TestAuditChain(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		chain AuditChain
		want  string
	}{
		{AuditChain{State: "intact", Rows: 1234, UpTo: 1234, LastHash: hash},
			"Hash chain intact: all 1,234 rows, up to row 1234, chain from the first. Last hash abababababababab…."},
		{AuditChain{State: "partial", Rows: 20000, UpTo: 20000, LastHash: hash},
			"Hash chain intact up to row 20000 (20,000 rows); the rows after it are checked on the next visits, or all at once by hookdedup audit verify."},
		{AuditChain{State: "broken", Rows: 2, UpTo: 2, BrokenAt: 3, Kind: "edited", Detail: "row 3 was edited"},
			"Hash chain broken at row 3 (edited). row 3 was edited. Rows up to row 2 chain from the first."},
		{AuditChain{State: "empty", LastHash: hash}, "Hash chain: no rows yet."},
	} {
		n := viewstest.One(t, viewstest.Render(t, auditChain(tc.chain)), "audit-chain")
		if got := strings.Join(strings.Fields(viewstest.Text(n)), " "); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q\nwant it to begin %q", tc.chain.State, got, tc.want)
		}
		if state, _ := viewstest.Attr(n, "data-state"); state != tc.chain.State {
			t.Errorf("data-state = %q, want %q", state, tc.chain.State)
		}
	}
}
