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

// BenchmarkRecord_ForensicsTraced is BenchmarkRecord_Forensics's Unique runs on a
// database whose key_traces holds BENCH_TRACES traces (default a million), as a
// database in production does once its claims have expired for a while: none of the
// deliveries' keys is traced. Each run works on a copy of one filled file, and
// measures once the writer's filter of keys is in use.
func BenchmarkRecord_ForensicsTraced(b *testing.B) {
	traces := benchEnvCount(b, "BENCH_TRACES", 1_000_000)
	seed := filepath.Join(b.TempDir(), "traced.db")
	benchFillTraces(b, seed, traces)
	for _, mode := range []string{"Plain", "Forensics"} {
		b.Run(mode+"/Unique", func(b *testing.B) {
			claim := storage.ClaimOptions{TTL: 24 * time.Hour}
			if mode == "Forensics" {
				claim.BusinessWindow = 14 * 24 * time.Hour
			}
			benchOnCopy(b, seed, func(db *sqlite.DB, i int64) error {
				d := benchDelivery(benchKey(i))
				if mode == "Forensics" {
					business := i
					if i%100 == 99 {
						business -= 50
					}
					d.BusinessKey = benchKey(business)
					d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: benchKey(-i), Window: 72 * time.Hour}}
				}
				return db.Record(context.Background(), d, claim)
			})
		})
	}
}

// benchEnvCount is the count that the environment variable name gives, def if unset.
func benchEnvCount(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// benchOnCopy measures record, which records the delivery numbered i, from 32 callers a
// core on a copy of the database file seed: claims a second, the CPU and the bytes
// written a delivery, and rows a batch. It measures once the writer's filter of keys is
// in use: the writer builds it from the file in the background, and looks every key up
// until it has.
func benchOnCopy(b *testing.B, seed string, record func(db *sqlite.DB, i int64) error) {
	path := filepath.Join(b.TempDir(), "bench.db")
	if out, err := exec.Command("cp", seed, path).CombinedOutput(); err != nil {
		b.Fatalf("copy %s: %v: %s", seed, err, out)
	}
	db := storagetest.OpenPath(b, path, sqlite.Options{Synchronous: "FULL"})
	var n atomic.Int64
	for i := 0; db.KeyFilters() < 1; i++ {
		if i == 100_000 {
			b.Fatal("the writer never took a filter of keys into use")
		}
		if err := record(db, n.Add(1)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	cpu := benchCPU()
	io := storagetest.ProcessIO("self")
	batches0, rows0 := db.BatchStats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := record(db, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	after := storagetest.ProcessIO("self")
	batches, rows := db.BatchStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(after.Written-io.Written)/float64(b.N), "written-B/op")
	b.ReportMetric(float64(rows-rows0)/float64(max(batches-batches0, 1)), "rows/batch")
}

// benchFillTraces makes a database at path whose key_traces holds traces traces of
// random keys of source ota, expired an hour ago.
func benchFillTraces(b *testing.B, path string, traces int) {
	b.Helper()
	expired := time.Now().Add(-time.Hour).UnixMilli()
	benchFillRows(b, path, `INSERT INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at)
SELECT 'ota', randomblob(32), ?2 - 86400000, i, ?2 FROM n`, traces, expired)
}

// benchFillRows makes (or opens) a database at path and runs insert there for each i of n(i), the
// numbers 1 to ?1 (rows), with args as ?2 on.
func benchFillRows(b *testing.B, path, insert string, rows int, args ...any) {
	b.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if rows == 0 {
		return
	}
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		b.Fatal(err)
	}
	_, err = raw.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) `+insert,
		append([]any{rows}, args...)...)
	if cerr := raw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
}
