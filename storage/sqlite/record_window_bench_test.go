package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// BenchmarkRecord_ForensicsWindow is BenchmarkRecord_Forensics's Forensics/Unique run
// on an empty database (Empty) and on one whose windows already hold BENCH_WINDOW_KEYS
// business keys (default a million) spread over the 14 days of the business window and
// as many correlation keys over the 72 hours of the rule's (Full), as a busy source's
// database holds them: what intake's forensics cost as the windows fill. Each run works
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
			benchOnCopy(b, run.seed, func(db *sqlite.DB, i int64) error {
				d := benchDelivery(benchKey(i))
				d.BusinessKey = benchHash(i)
				d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: benchHash(-i), Window: refundWindow}}
				return db.Record(context.Background(), d, claim)
			})
		})
	}
}

// benchFillWindows makes a database at path whose business_keys holds keys random
// business keys of source ota seen over the window before now, an equal share each
// day, and whose correlation_keys holds as many over refundWindow. Their deliveries are
// numbered below any that intake gives.
func benchFillWindows(b *testing.B, path string, keys int, window, refundWindow time.Duration) {
	b.Helper()
	now := time.Now().UnixMilli()
	benchFillRows(b, path, `INSERT INTO business_keys (delivery, source, hash, seen_at)
SELECT -i, 'ota', randomblob(32), ?2 - i * ?3 / ?1 FROM n`, keys, now, window.Milliseconds())
	benchFillRows(b, path, `INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT 'double-refund', randomblob(32), 'ota', -i, ?2 - i * ?3 / ?1 FROM n`, keys, now, refundWindow.Milliseconds())
}
