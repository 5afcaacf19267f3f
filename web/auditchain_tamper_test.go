package web_test

import (
	"database/sql"
	"net/http"
	"testing"
)

// TestConsole_AuditTimeNotAnIntegerShowsTheBreak: someone with the file puts a text
// where row 2's time belongs (SQLite takes it: the table is not STRICT). The audit page,
// where an admin looks for tampering, still lists the log and shows the chain broken at
// row 2.
func TestConsole_AuditTimeNotAnIntegerShowsTheBreak(t *testing.T) {
	e := newConsoleEnv(t)
	raw, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE audit_log SET at = 'yesterday' WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	code, p := e.as(t, "viewer").page("/audit")
	if code != http.StatusOK {
		t.Fatalf("GET /audit with row 2's time tampered: %d, want 200 showing the break\n%s", code, p.text())
	}
	chain := p.testid("audit-chain")
	if got := chain.attrs("data-state"); len(got) != 1 || got[0] != "broken" {
		t.Fatalf("chain state = %q, want broken", got)
	}
	chain.shows("Hash chain broken at row 2")
}
