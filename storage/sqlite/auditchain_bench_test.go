package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkVerifyAudit checks a chain of 100,000 rows whole (as audit verify does), and
// the console's bounded step from the genesis (AuditCheckBatch rows).
func BenchmarkVerifyAudit(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(b, path, sqlite.Options{})
	raw := rawDB(b, path)
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	const n = 100000
	prev := storage.AuditGenesis
	for id := int64(1); id <= n; id++ {
		reason := fmt.Sprintf("released after the downstream outage, ticket %d", id)
		prev = refHash(prev, id, 1767225600000+id, "operator", "release", "ota", "evt_0123456789abcdef", reason, "failed")
		if _, err := tx.Exec(`INSERT INTO audit_log (id, at, actor, action, source, key, reason, previous_state, hash)
			VALUES (?, ?, 'operator', 'release', 'ota', 'evt_0123456789abcdef', ?, 'failed', ?)`, id, 1767225600000+id, reason, prev); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.Run("Whole", func(b *testing.B) {
		for b.Loop() {
			if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Rows != n {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("ConsoleFirstStep", func(b *testing.B) {
		for b.Loop() {
			db.ForgetAuditMark()
			if c, err := db.AuditChain(ctx); err != nil || c.Rows != sqlite.AuditCheckBatch {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("ConsoleCaughtUp", func(b *testing.B) {
		for c, err := db.AuditChain(ctx); c.More; c, err = db.AuditChain(ctx) {
			if err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			if c, err := db.AuditChain(ctx); err != nil || c.Rows != n {
				b.Fatal(c, err)
			}
		}
	})
}
