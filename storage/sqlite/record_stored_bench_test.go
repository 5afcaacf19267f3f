package sqlite_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// benchWarmUp is how many deliveries BenchmarkRecord_Stored records before it measures.
const benchWarmUp = 20_000

// BenchmarkRecord_Stored is BenchmarkRecord's FULL runs on a database that already holds
// BENCH_STORED_KEYS keys (each with its accepted delivery), where every new key lands
// on leaves of the key-ordered indexes that no recent key touched. The filled file is
// kept under BENCH_STORED_DIR, made once per size, and each run works on a copy of it,
// so that runs of two builds start from the same file. Skipped without both.
// BENCH_STORED_SQL, if set, is run on each copy with the sqlite3 command before it is
// opened (say, to undo a migration and compare with an older build's schema).
func BenchmarkRecord_Stored(b *testing.B) {
	keys, _ := strconv.Atoi(os.Getenv("BENCH_STORED_KEYS"))
	dir := os.Getenv("BENCH_STORED_DIR")
	if keys <= 0 || dir == "" {
		b.Skip("BENCH_STORED_KEYS and BENCH_STORED_DIR say the size and where its filled file is kept")
	}
	seed := filepath.Join(dir, fmt.Sprintf("stored-%d.db", keys))
	if _, err := os.Stat(seed); err != nil {
		benchFill(b, seed, keys)
	}
	for _, mix := range []string{"Unique", "HalfDuplicates", "HalfDuplicatesOfRecent"} {
		b.Run(mix, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			if out, err := exec.Command("cp", seed, path).CombinedOutput(); err != nil {
				b.Fatalf("copy %s: %v: %s", seed, err, out)
			}
			if q := os.Getenv("BENCH_STORED_SQL"); q != "" {
				if out, err := exec.Command("sqlite3", path, q).CombinedOutput(); err != nil {
					b.Fatalf("%s: %v: %s", q, err, out)
				}
			}
			db := storagetest.OpenPath(b, path, sqlite.Options{Synchronous: "FULL"})
			claim := storage.ClaimOptions{TTL: 24 * time.Hour}
			var n atomic.Int64
			record := func(pb *testing.PB) {
				for pb.Next() {
					if err := db.Record(context.Background(), benchDelivery(spreadKey(benchRepeat(mix, n.Add(1)))), claim); err != nil {
						b.Error(err)
						return
					}
				}
			}
			b.SetParallelism(32)
			// A warm-up, not measured: the figures are for a server that has been
			// running, its caches holding what it keeps coming back to.
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for n.Load() < benchWarmUp {
						if err := db.Record(context.Background(), benchDelivery(spreadKey(benchRepeat(mix, n.Add(1)))), claim); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			cpu := benchCPU()
			io := storagetest.ProcessIO("self")
			batches0, rows0 := db.BatchStats()
			b.ResetTimer()
			b.RunParallel(record)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
			b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			after := storagetest.ProcessIO("self")
			b.ReportMetric(float64(after.Written-io.Written)/float64(b.N), "written-B/op")
			b.ReportMetric(float64(after.Writes-io.Writes)/float64(b.N), "writes/op")
			b.ReportMetric(float64(after.Read-io.Read)/float64(b.N), "read-B/op")
			batches, rows := db.BatchStats()
			b.ReportMetric(float64(rows-rows0)/float64(max(batches-batches0, 1)), "rows/batch")
		})
	}
}

// benchRepeat is the number of the key that delivery i of mix carries. HalfDuplicates
// repeats the key just before (mostly claimed in the same batch), HalfDuplicatesOfRecent
// an original key from up to a thousand deliveries back, as the load harness's wrk
// script does (testdata/sign.lua): its claim and first delivery were committed batches
// earlier, with hundreds of new keys stored in between.
func benchRepeat(mix string, i int64) int64 {
	if i%2 != 0 {
		return i
	}
	switch mix {
	case "HalfDuplicates":
		return i - 1
	case "HalfDuplicatesOfRecent":
		return max(i-1-2*((i*7919)%500), 1)
	}
	return i
}

// spreadKey is key i, spread over the whole key space: consecutive keys share no
// prefix, as independent random provider ids do not (benchKey's consecutive keys share
// their first few hex digits, so a batch of them lands on a few leaves of each index).
func spreadKey(i int64) string {
	x := uint64(i) + 0x9e3779b97f4a7c15 // splitmix64's finaliser
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return fmt.Sprintf("msg_%016x_%d", x^(x>>31), i)
}

// benchFill makes the filled file of BenchmarkRecord_Stored: keys keys of source ota,
// spread over the key space of benchKey.
func benchFill(b *testing.B, path string, keys int) {
	b.Helper()
	tmp := path + ".filling"
	os.Remove(tmp)
	db, err := sqlite.Open(tmp, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	err = storagetest.BulkLoad(context.Background(), db, storagetest.Fill{
		Source:    "ota",
		Keys:      keys,
		ClaimedAt: time.Now().Add(-time.Hour),
		TTL:       30 * 24 * time.Hour,
		Key: func(i int) string {
			return fmt.Sprintf("msg_%016x_fill_%d", uint64(i)*(math.MaxUint64/uint64(keys)), i)
		},
		Headers: `{"Content-Type":["application/json"],"Webhook-Id":["msg_fill"],"Webhook-Signature":["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="]}`,
		Body: func(i int) []byte {
			return []byte(strings.Replace(benchBody, "BK-2025-118734", fmt.Sprintf("BK-f-%d", i), 1))
		},
	}, nil)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
}
