package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkSweepExpired measures the claims sweep over processed keys whose claims have
// expired: each batch deletes rows claims (1,000, the most a batch takes, and 100, the
// fewest it is sized down to: receiver.MinBatch) and writes a trace of each for late
// duplicates, under the write lock that intake waits for.
func BenchmarkSweepExpired(b *testing.B) {
	for _, rows := range []int{1000, 100} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := context.Background()
			db := storagetest.Open(b)
			n := max(b.N, 1) * rows
			err := storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: n,
				Key:       func(i int) string { return fmt.Sprintf("evt_%08x", uint32(i)*2654435761) },
				ClaimedAt: time.Now().Add(-48 * time.Hour), TTL: 24 * time.Hour,
				Headers: "{}", Body: func(int) []byte { return []byte(`{}`) }}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if got, err := db.SweepExpired(ctx, time.Now(), rows); err != nil || got != int64(rows) {
					b.Fatalf("swept %d, %v", got, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/batch")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows)/1000, "µs/claim")
		})
	}
}
