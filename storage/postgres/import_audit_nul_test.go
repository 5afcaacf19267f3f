package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestImport_AuditNULStoredAsOnPostgres: a NUL in an audit row's text (a reason, a key
// released) is stored by SQLite as U+FFFD, as PostgreSQL stores it: the database can be
// copied by migrate, and its copied chain verifies.
func TestImport_AuditNULStoredAsOnPostgres(t *testing.T) {
	ctx := context.Background()
	lite, path := sqliteWithEverything(t)
	// Past the leases sqliteWithEverything took, so that i2 has no attempt under way.
	later := lite.Now().Add(2 * time.Minute)
	lite.Now = func() time.Time { return later }
	if _, err := lite.ReleaseKey(ctx, storage.Release{Source: "cm", Key: "i2", Actor: "ann", Reason: "a\x00b",
		StuckBefore: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, _, _, err := importFile(t, path)
	if err != nil {
		t.Fatalf("copy of a database whose audit log was given a NUL: %v", err)
	}
	if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Break != nil {
		t.Fatalf("the copied chain: %+v, %v", c, err)
	}
	entries, err := db.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || e.Reason == "a\uFFFDb"
	}
	if !found {
		t.Errorf("no audit row holds the reason as a\uFFFDb: %+v", entries)
	}
}
