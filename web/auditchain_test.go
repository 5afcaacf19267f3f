package web_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConsole_AuditChain: the audit page says whether the log's hash chain holds, up to
// which row and with which last hash, and where it breaks once a row is changed outside
// hookdedup.
func TestConsole_AuditChain(t *testing.T) {
	ctx := context.Background()
	t.Run("Intact", func(t *testing.T) {
		e := newConsoleEnv(t)
		want, err := e.db.VerifyAudit(ctx, storage.AuditAnchor{})
		if err != nil || want.Break != nil || want.Rows == 0 {
			t.Fatal(want, err)
		}
		_, p := e.as(t, "viewer").page("/audit")
		chain := p.testid("audit-chain")
		if got := chain.attrs("data-state"); len(got) != 1 || got[0] != "intact" {
			t.Fatalf("chain state = %q, want intact", got)
		}
		chain.shows("Hash chain intact: all 3 rows, up to row 3", want.LastHash[:16])
		if titles := chain.tag("code").attrs("title"); len(titles) != 1 || titles[0] != want.LastHash {
			t.Errorf("the last hash in full = %q, want %s", titles, want.LastHash)
		}
	})
	t.Run("Broken", func(t *testing.T) {
		e := newConsoleEnv(t)
		raw, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=5000")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Exec(`UPDATE audit_log SET reason = 'nobody' WHERE id = 2`); err != nil {
			t.Fatal(err)
		}
		_, p := e.as(t, "viewer").page("/audit")
		chain := p.testid("audit-chain")
		if got := chain.attrs("data-state"); len(got) != 1 || got[0] != "broken" {
			t.Fatalf("chain state = %q, want broken", got)
		}
		chain.shows("Hash chain broken at row 2 (edited).", "row 2 was edited", "Row 1, the first, chains.")
		if role := chain.attrs("role"); len(role) != 1 || role[0] != "alert" {
			t.Errorf("role = %q, want alert", role)
		}
		// Rows written after the break do not hide it.
		if err := e.db.AppendAudit(ctx, storage.AuditEntry{Actor: "admin", Action: "reveal secret", Source: "ota"}); err != nil {
			t.Fatal(err)
		}
		_, p = e.as(t, "viewer").page("/audit")
		if text := p.testid("audit-chain").text(); !strings.Contains(text, "broken at row 2") {
			t.Errorf("after a new row: %s", text)
		}
	})
}
