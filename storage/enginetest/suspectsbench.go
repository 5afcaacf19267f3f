package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// BenchSuspectCounts times the console's counts of suspects (SuspectCounts) and the
// open suspects' alert (OpenSuspects) on db, whose n suspects the engine's benchmark
// inserted: *NotFolded before any roll-up, as a database from before the running
// totals has them; *Folded after the roll-up, with 1,000 more flagged since (flagMore),
// as a running server has them. It logs how long the roll-up took.
func BenchSuspectCounts(b *testing.B, db storage.Store, n int, flagMore func()) {
	ctx := context.Background()
	bench := func(name string) {
		b.Run("Counts"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.SuspectCounts(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Open"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.OpenSuspects(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	bench("NotFolded")
	t0 := time.Now()
	for {
		k, err := db.RollupSuspects(ctx, 5000)
		if err != nil {
			b.Fatal(err)
		}
		if k < 5000 {
			break
		}
	}
	b.Logf("rolled %d suspects up in %s, 5,000 a call", n, time.Since(t0).Round(time.Millisecond))
	flagMore()
	bench("Folded")
}
