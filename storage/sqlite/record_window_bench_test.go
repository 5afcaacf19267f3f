package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// BenchmarkRecord_ForensicsWindow is BenchmarkRecord_Forensics's Forensics/Unique run
// on an empty database (Empty) and on one whose windows already hold BENCH_WINDOW_KEYS
// business keys (default a million) spread over the 14 days of the business window and
// as many correlation keys over the 72 hours of the rule's (Full), as a busy source's
// database holds them: what intake's forensics cost as the windows fill. One delivery in
// a hundred carries the business key of one already held, seen anywhere in the window
// (in Empty, none is held: the key is new), and is looked up and flagged. Each run works
// on a copy of one filled file, and measures once the writer's filter of keys is in use.
func BenchmarkRecord_ForensicsWindow(b *testing.B) {
	keys := benchEnvCount(b, "BENCH_WINDOW_KEYS", 1_000_000)
	const window, refundWindow = 14 * 24 * time.Hour, 72 * time.Hour
	empty := filepath.Join(b.TempDir(), "empty.db")
	full := filepath.Join(b.TempDir(), "full.db")
	benchFillWindows(b, empty, 0, window, refundWindow)
	benchFillWindows(b, full, keys, window, refundWindow)
	claim := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: window}
	for _, run := range []struct{ name, seed string }{{"Empty", empty}, {"Full", full}} {
		b.Run(run.name, func(b *testing.B) {
			var flagged atomic.Int64
			benchOnCopy(b, run.seed, func(db *sqlite.DB, i int64) error {
				d := benchDelivery(benchKey(i))
				d.BusinessKey = benchHash(i)
				if i%100 == 99 {
					d.BusinessKey = windowKey(1 + i*7919%int64(max(keys, 1)))
				}
				d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: benchHash(-i), Window: refundWindow}}
				err := db.Record(context.Background(), d, claim)
				if slices.Contains(d.Suspects, storage.SuspectBusinessKey) {
					flagged.Add(1)
				}
				return err
			})
			// The filter's warm-up counts too: a few deliveries in thousands.
			b.ReportMetric(float64(flagged.Load())/float64(b.N), "flagged/op")
		})
	}
}

// benchFillWindows makes a database at path whose business_keys holds keys business
// keys of source ota (windowKey of 1 to keys) seen over the window before now, an
// equal share each day, and whose correlation_keys holds as many random ones over
// refundWindow. Their deliveries are numbered below any that intake gives.
func benchFillWindows(b *testing.B, path string, keys int, window, refundWindow time.Duration) {
	b.Helper()
	now := time.Now().UnixMilli()
	benchFillRows(b, path, `INSERT INTO business_keys (delivery, source, hash, seen_at)
SELECT -i, 'ota', unhex(printf('%08x%08x%048x', i * 2654435761 % 4294967296, i, 0)), ?2 - i * ?3 / ?1 FROM n`, keys, now, window.Milliseconds())
	benchFillRows(b, path, `INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT 'double-refund', randomblob(32), 'ota', -i, ?2 - i * ?3 / ?1 FROM n`, keys, now, refundWindow.Milliseconds())
}

// windowKey is the business key numbered i that benchFillWindows stores: its first 8
// bytes, by which the key is indexed, spread as a hash's are.
func windowKey(i int64) string { return fmt.Sprintf("%08x%08x%048x", i*2654435761%4294967296, i, 0) }
