package sqlite_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestAuditChain_MarkCutShowsAtOnceBeyondBatch: the console has checked a log of more
// than one batch (auditCheckBatch rows) to its end; the last rows are then deleted from
// the file. The next look, whose bounded check from the genesis stops short of the row
// it had checked, tells the cut at once, not one look per batch later.
func TestAuditChain_MarkCutShowsAtOnceBeyondBatch(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 0)
	raw := rawDB(t, path)
	n := int64(sqlite.AuditCheckBatch + 5)
	writeAuditRows(t, raw, n)
	for range 2 {
		if _, err := db.AuditChain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := db.AuditChain(ctx)
	if err != nil || c.Break != nil || c.More || c.LastID != n {
		t.Fatalf("before the cut: %+v, %v; want all %d rows checked", c, err, n)
	}
	rawExec(t, raw, fmt.Sprintf(`DELETE FROM audit_log WHERE id > %d`, n-3))
	c, err = db.AuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Break == nil {
		t.Errorf("first look after rows %d to %d, which the console had checked, were deleted: %+v; "+
			"want the cut shown at once (the mark's row is gone), not a partial check that looks fine", n-2, n, c)
	}
}
