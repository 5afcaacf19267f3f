package main

import (
	"strings"
	"testing"
)

// TestAuditVerify_TimeNotAnIntegerIsABreak: SQLite keeps any value in any column (the
// audit_log table is not STRICT), so someone with the file can put a text, or a
// fraction, where a row's time belongs. That is an edited row: `audit verify` exits 1
// naming it, not 2 as for a database it cannot read.
func TestAuditVerify_TimeNotAnIntegerIsABreak(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, stmt string }{
		{"TextTime", `UPDATE audit_log SET at = 'yesterday' WHERE id = 3`},
		{"FractionTime", `UPDATE audit_log SET at = at + 0.5 WHERE id = 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := auditDB(t, dir)
			tamper(t, path, tc.stmt)
			out, code := cli(t, dir, nil, "", "audit", "verify", "--database="+path)
			if code != 1 || !strings.Contains(out, "broken at row 3") {
				t.Fatalf("row 3's time replaced (%s): exit %d, want 1 naming row 3\n%s", tc.stmt, code, out)
			}
		})
	}
}
