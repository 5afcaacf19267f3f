package postgres_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
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

// benchKey is key i: random-looking, as providers' ids are, so that claims land all
// over the key index rather than at its right edge.
func benchKey(i int64) string {
	h := fnv.New64a()
	fmt.Fprint(h, i)
	return fmt.Sprintf("msg_%016x_%d", h.Sum64(), i)
}

// BenchmarkRecord_Postgres measures durable claims on PostgreSQL (fsync and
// synchronous_commit on, the server on this machine) with 64 concurrent callers, half
// of the deliveries duplicates of a recent key (HalfDuplicates) or none (Unique): µs/op
// is the wall time per claim, the inverse of claims per second; cpu-µs/op the CPU of
// this process per claim, pg-cpu-µs/op the server's. Serial is one caller at a time,
// each claim paying its own commit. Replicas3HalfDuplicates has the callers take turns
// on three handles of one database, as three replicas behind a load balancer, so that a
// delivery and its duplicate reach two of them: deadlocks counts the transactions
// PostgreSQL aborted for a deadlock (each costs its deadlock_timeout, a second).
// ForensicsHalfDuplicates and ForensicsUnique give every delivery a business key and a
// correlation key of its own, as a source with refund forensics on does: each accepted
// one is looked up and stored twice more, and none is flagged.
func BenchmarkRecord_Postgres(b *testing.B) {
	for _, mode := range []string{"HalfDuplicates", "Unique", "Serial", "Replicas3HalfDuplicates",
		"ForensicsHalfDuplicates", "ForensicsUnique"} {
		b.Run(mode, func(b *testing.B) {
			url := postgrestest.NewDatabase(b)
			replicas := 1
			if mode == "Replicas3HalfDuplicates" {
				replicas = 3
			}
			dbs := make([]*postgres.DB, replicas)
			for i := range dbs {
				db, err := postgres.Open(context.Background(), url, postgres.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				dbs[i] = db
			}
			claim := storage.ClaimOptions{TTL: 24 * time.Hour}
			forensics := strings.HasPrefix(mode, "Forensics")
			if forensics {
				claim.BusinessWindow = 14 * 24 * time.Hour
			}
			var n atomic.Int64
			record := func() error {
				i := n.Add(1)
				db := dbs[int(i)%len(dbs)]
				if i%2 == 0 && !strings.HasSuffix(mode, "Unique") {
					i-- // the key the previous caller claimed
				}
				d := benchDelivery(benchKey(i))
				if forensics {
					d.BusinessKey = fmt.Sprintf("%064x", i)
					d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: fmt.Sprintf("%064x", -i), Window: 72 * time.Hour}}
				}
				return db.Record(context.Background(), d, claim)
			}
			b.ReportAllocs()
			serverCPU := postgrestest.ClusterCPU(b, url)
			self, pg := postgrestest.ProcessCPU("self"), serverCPU()
			b.ResetTimer()
			if mode != "Serial" {
				b.SetParallelism(32) // 64 goroutines on 2 cores
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := record(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for range b.N {
					if err := record(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
			b.ReportMetric(float64((postgrestest.ProcessCPU("self")-self).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64((serverCPU()-pg).Microseconds())/float64(b.N), "pg-cpu-µs/op")
			if replicas > 1 {
				b.ReportMetric(float64(deadlocks(b, url, dbs)), "deadlocks")
			}
		})
	}
}

// deadlocks closes dbs and returns how many deadlocks PostgreSQL counted in the
// database of url. A server process counts its own and reports them when it next has a
// moment, at the latest when it exits: once every connection but the one asking has
// gone, the count is whole.
func deadlocks(b testing.TB, url string, dbs []*postgres.DB) int64 {
	for _, db := range dbs {
		db.Close()
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	for range 1000 {
		var others int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			b.Fatal(err)
		}
		if others == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database
WHERE datname = current_database()`).Scan(nil, &n); err != nil {
		b.Fatal(err)
	}
	return n
}
