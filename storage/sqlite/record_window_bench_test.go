package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkRecord_ForensicsWindow is BenchmarkRecord_Forensics's Forensics/Unique run
// on an empty database (Empty) and on one whose windows already hold BENCH_WINDOW_KEYS
// business keys (default a million) spread over the 14 days of the business window and
// as many correlation keys over the 72 hours of the rule's (Full), as a busy source's
// database holds them: what intake's forensics cost as the windows fill. Each run works
// on a copy of one filled file, and measures once the writer's filter of keys is in use.
func BenchmarkRecord_ForensicsWindow(b *testing.B) {
	keys := 1_000_000
	if s := os.Getenv("BENCH_WINDOW_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_WINDOW_KEYS=%q: want a number of keys", s)
		}
		keys = n
	}
	const window, refundWindow = 14 * 24 * time.Hour, 72 * time.Hour
	empty := filepath.Join(b.TempDir(), "empty.db")
	full := filepath.Join(b.TempDir(), "full.db")
	benchFillWindows(b, empty, 0, window, refundWindow)
	benchFillWindows(b, full, keys, window, refundWindow)
	for _, run := range []struct{ name, seed string }{{"Empty", empty}, {"Full", full}} {
		b.Run(run.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			if out, err := exec.Command("cp", run.seed, path).CombinedOutput(); err != nil {
				b.Fatalf("copy %s: %v: %s", run.seed, err, out)
			}
			db := storagetest.OpenPath(b, path, sqlite.Options{Synchronous: "FULL"})
			var n atomic.Int64
			claim := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: window}
			record := func() error {
				i := n.Add(1)
				d := benchDelivery(benchKey(i))
				d.BusinessKey = benchHash(i)
				d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: benchHash(-i), Window: refundWindow}}
				return db.Record(context.Background(), d, claim)
			}
			// Not measured: the writer builds its filter from the file in the background.
			for i := 0; db.KeyFilters() < 1; i++ {
				if i == 100_000 {
					b.Fatal("the writer never took a filter of keys into use")
				}
				if err := record(); err != nil {
					b.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu := benchCPU()
			io := storagetest.ProcessIO("self")
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := record(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			after := storagetest.ProcessIO("self")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
			b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(after.Written-io.Written)/float64(b.N), "written-B/op")
		})
	}
}

// benchFillWindows makes a database at path whose business_keys holds keys random
// business keys of source ota seen over the window before now, an equal share each
// day, and whose correlation_keys holds as many over refundWindow. Their deliveries are
// numbered below any that intake gives.
func benchFillWindows(b *testing.B, path string, keys int, window, refundWindow time.Duration) {
	b.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if keys == 0 {
		return
	}
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	now := time.Now().UnixMilli()
	for _, q := range []struct {
		sql  string
		over time.Duration
	}{
		{`INSERT INTO business_keys (delivery, source, hash, seen_at) SELECT -i, 'ota', randomblob(32), ?2 - i * ?3 / ?1 FROM n`, window},
		{`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at) SELECT 'double-refund', randomblob(32), 'ota', -i, ?2 - i * ?3 / ?1 FROM n`, refundWindow},
	} {
		if _, err := raw.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) `+q.sql,
			keys, now, q.over.Milliseconds()); err != nil {
			b.Fatal(err)
		}
	}
}
