package sqlite_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// benchBody is a realistic OTA cancellation of about 600 bytes.
const benchBody = `{"event_id":"evt_01J9ZQ4N8T3V6W2X5Y7Z9A1B3C","type":"booking.cancelled",` +
	`"created_at":"2025-11-29T18:42:07Z","property_id":"PROP-000417","booking_id":"BK-2025-118734",` +
	`"status":"cancelled","effective_date":"2025-12-20","channel":"booking.com","guest":{"name":"A. Guest",` +
	`"country":"DE"},"stay":{"arrival":"2025-12-20","departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL",` +
	`"rate_plan":"BAR-FLEX","adults":2,"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},` +
	`"refund":{"amount":"412.50","currency":"EUR","reason":"guest_request","policy":"free_cancellation"},` +
	`"cancellation":{"id":"CXL-88231","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}`

// benchDelivery is what the handler hands Record for a standard-webhooks delivery.
func benchDelivery(key string) *storage.Delivery {
	return &storage.Delivery{
		Source:      "ota",
		Status:      200,
		Key:         key,
		KeyMethod:   "event_id",
		KeyFrom:     "header:webhook-id",
		PayloadHash: "9f2b5c0e4a7d1f3b6c8e0a2d4f6b8c0e2a4d6f8b0c2e4a6d8f0b2c4e6a8d0f2b",
		Property:    "PROP-000417",
		Booking:     storagetest.BookingOf(key),
		EventStatus: "cancelled",
		Amount:      "412.50",
		RemoteAddr:  "127.0.0.1:53412",
		ContentType: "application/json",
		Headers: map[string][]string{
			"Content-Type":      {"application/json"},
			"Content-Length":    {"612"},
			"User-Agent":        {"Svix-Webhooks/1.24"},
			"Webhook-Id":        {key},
			"Webhook-Timestamp": {"1764441727"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		},
		Body: []byte(benchBody),
	}
}

// benchCPU is the CPU time this process has used, user and system: per operation it is
// a steadier figure than the wall clock on a machine shared with other work.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchKey is key i: random-looking, as providers' ids are, so that claims land all
// over the key indexes rather than at their right edge.
func benchKey(i int64) string {
	h := fnv.New64a()
	fmt.Fprint(h, i)
	return fmt.Sprintf("msg_%016x_%d", h.Sum64(), i)
}

// benchHash is forensic hash i as the receiver makes one: the hex SHA-256 of a key's
// canonical JSON.
func benchHash(i int64) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(i, 10)))
	return hex.EncodeToString(h[:])
}

func benchOpen(b *testing.B, sync string) *sqlite.DB {
	b.Helper()
	return storagetest.OpenPath(b, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Synchronous: sync})
}

// BenchmarkRecord measures durable claims through the group commit with 64 concurrent
// callers (the load run's connections): all unique keys, and half of them duplicates of
// a recent key. ns/op is the inverse of claims per second.
func BenchmarkRecord(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, mix := range []string{"Unique", "HalfDuplicates"} {
			b.Run(sync+"/"+mix, func(b *testing.B) {
				db := benchOpen(b, sync)
				var n atomic.Int64
				claim := storage.ClaimOptions{TTL: 24 * time.Hour}
				b.SetParallelism(32) // 64 goroutines on 2 cores
				b.ReportAllocs()
				cpu := benchCPU()
				io := storagetest.ProcessIO("self")
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if mix == "HalfDuplicates" && i%2 == 0 {
							i-- // the key the previous caller claimed
						}
						if err := db.Record(context.Background(), benchDelivery(benchKey(i)), claim); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
				b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
				after := storagetest.ProcessIO("self")
				b.ReportMetric(float64(after.Written-io.Written)/float64(b.N), "written-B/op")
				b.ReportMetric(float64(after.Writes-io.Writes)/float64(b.N), "writes/op")
				batches, rows := db.BatchStats()
				b.ReportMetric(float64(rows)/float64(max(batches, 1)), "rows/batch")
			})
		}
	}
}

// BenchmarkRecord_Dispatch is BenchmarkRecord's FULL/Unique for a source with a
// downstream: each claim is made in state processing, so the indexes of unsettled keys
// take it too.
func BenchmarkRecord_Dispatch(b *testing.B) {
	db := benchOpen(b, "FULL")
	var n atomic.Int64
	claim := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	b.SetParallelism(32)
	b.ReportAllocs()
	cpu := benchCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := db.Record(context.Background(), benchDelivery(benchKey(n.Add(1))), claim); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkRecord_Serial is one caller at a time: every claim pays its own commit (and,
// under FULL, its own fsync).
func BenchmarkRecord_Serial(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run(sync, func(b *testing.B) {
			db := benchOpen(b, sync)
			claim := storage.ClaimOptions{TTL: 24 * time.Hour}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := db.Record(context.Background(), benchDelivery(benchKey(int64(i))), claim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecord_Forensics is BenchmarkRecord's FULL runs for a source with a business
// key and a correlation rule: every accepted delivery's keys are looked up and stored in
// the claim's transaction. Plain is the same without them, side by side.
func BenchmarkRecord_Forensics(b *testing.B) {
	for _, mode := range []string{"Plain", "Forensics"} {
		for _, mix := range []string{"Unique", "HalfDuplicates"} {
			b.Run(mode+"/"+mix, func(b *testing.B) {
				db := benchOpen(b, "FULL")
				var n atomic.Int64
				claim := storage.ClaimOptions{TTL: 24 * time.Hour}
				if mode == "Forensics" {
					claim.BusinessWindow = 14 * 24 * time.Hour
				}
				b.SetParallelism(32)
				b.ReportAllocs()
				cpu := benchCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if mix == "HalfDuplicates" && i%2 == 0 {
							i--
						}
						d := benchDelivery(benchKey(i))
						if mode == "Forensics" {
							business := i
							if i%100 == 99 {
								business -= 50 // one business key in a hundred repeats an earlier one
							}
							d.BusinessKey = benchHash(business)
							d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: benchHash(-i), Window: 72 * time.Hour}}
						}
						if err := db.Record(context.Background(), d, claim); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
				b.ReportMetric(float64((benchCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
