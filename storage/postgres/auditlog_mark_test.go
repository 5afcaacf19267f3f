package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestAuditChain_MarkCutShows: a replica's console check has seen rows 1 to 5; rows 4
// and 5 are then deleted in the database. The replica, which saw row 5, reports the
// rows gone.
func TestAuditChain_MarkCutShows(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	for i := 1; i <= 5; i++ {
		if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota",
			Reason: fmt.Sprintf("look %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := db.AuditChain(ctx)
	if err != nil || c.Break != nil || c.LastID != 5 {
		t.Fatalf("first look: %+v, %v", c, err)
	}
	if _, err := postgrestest.Connect(t, url).Exec(ctx, `DELETE FROM audit_log WHERE id >= 4`); err != nil {
		t.Fatal(err)
	}
	c, err = db.AuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Break == nil || c.Break.Kind != storage.AuditDeleted {
		t.Fatalf("after rows 4 and 5, which this replica had checked, were deleted: %+v; want a break (deleted)", c)
	}
}
