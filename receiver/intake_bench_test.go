package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

const intakeSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// intakeBody is delivery n: a realistic OTA cancellation of about 600 bytes whose
// content depends on n alone, so that a redelivery is byte for byte the same.
func intakeBody(n int64) []byte {
	return fmt.Appendf(nil, `{"event_id":"evt_%d","type":"booking.cancelled","created_at":"2025-11-29T18:42:07Z",`+
		`"property_id":"PROP-%06d","booking_id":"BK-%d","status":"cancelled","effective_date":"2025-12-20",`+
		`"channel":"booking.com","guest":{"name":"A. Guest","country":"DE"},"stay":{"arrival":"2025-12-20",`+
		`"departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL","rate_plan":"BAR-FLEX","adults":2,`+
		`"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},"refund":{"amount":"412.50",`+
		`"currency":"EUR","reason":"guest_request","policy":"free_cancellation"},"cancellation":`+
		`{"id":"CXL-%d","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}`,
		n, n%400, n, n)
}

// intakeStore is a Store made of functions, for a handler that stores nothing.
type intakeStore struct {
	record func(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error
}

func (s intakeStore) Record(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error {
	return s.record(ctx, d, claim)
}
func (s intakeStore) RecordBatch(ctx context.Context, items []*storage.Delivery, claim storage.ClaimOptions) error {
	for _, d := range items {
		if err := s.record(ctx, d, claim); err != nil {
			return err
		}
	}
	return nil
}
func (s intakeStore) Ping(context.Context) error { return nil }

// BenchmarkIntake drives the whole webhook handler in process, 64 concurrent senders on
// a real database file: signed standard-webhooks deliveries, verified, key derived,
// claimed and stored durably before the 200. Each request is signed inside the loop
// (about 2 µs of the figure). NoStore is the same handler with a store that only says
// "accepted": the cost of HTTP handling, the signature and the key, without SQLite.
func BenchmarkIntake(b *testing.B) {
	for _, store := range []string{"FULL", "NORMAL", "NoStore"} {
		for _, mix := range []string{"Unique", "HalfDuplicates"} {
			if store == "NoStore" && mix == "HalfDuplicates" {
				continue
			}
			b.Run(store+"/"+mix, func(b *testing.B) { benchIntake(b, store, mix == "HalfDuplicates") })
		}
	}
}

// BenchmarkIntake_Forensics is BenchmarkIntake's FULL runs for a source with a business
// key and a correlation rule (Forensics) and without (Plain), side by side.
func BenchmarkIntake_Forensics(b *testing.B) {
	for _, mode := range []string{"Plain", "Forensics"} {
		for _, mix := range []string{"Unique", "HalfDuplicates"} {
			b.Run(mode+"/"+mix, func(b *testing.B) {
				benchIntakeWith(b, "FULL", mix == "HalfDuplicates", func(src *receiver.Source) {
					if mode == "Plain" {
						return
					}
					src.BusinessKey = []string{"/property_id", "/booking_id", "/status", "/refund/amount"}
					src.Correlations = []receiver.Correlation{{Rule: "double-refund", Window: 72 * time.Hour,
						Booking: "/booking_id", Amount: "/refund/amount", Currency: "/refund/currency"}}
				})
			})
		}
	}
}

func benchIntake(b *testing.B, store string, half bool) { benchIntakeWith(b, store, half, nil) }

// benchIntakeWith is benchIntake for a source that configure may change first.
func benchIntakeWith(b *testing.B, store string, half bool, configure func(*receiver.Source)) {
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{intakeSecret}})
	if err != nil {
		b.Fatal(err)
	}
	src := receiver.Source{
		Name:     "ota",
		Verifier: v,
		Keys: receiver.KeySpec{EventID: []string{"header:webhook-id"},
			KeyFields: []string{"/property_id", "/booking_id", "/status", "/effective_date"}},
		TTL:         24 * time.Hour,
		AmountField: []string{"/refund/amount"},
	}
	if configure != nil {
		configure(&src)
	}
	var st receiver.Store
	if store == "NoStore" {
		var id atomic.Int64
		st = intakeStore{record: func(_ context.Context, d *storage.Delivery, _ storage.ClaimOptions) error {
			d.ID, d.Outcome, d.Status = id.Add(1), storage.Accepted, http.StatusOK
			return nil
		}}
	} else {
		st = storagetest.OpenPath(b, filepath.Join(b.TempDir(), "intake.db"), sqlite.Options{Synchronous: store})
	}
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: st})
	mux := http.NewServeMux()
	rc.Register(mux)

	var n atomic.Int64
	b.SetParallelism(32) // 64 senders on 2 cores, as in the load run
	b.ReportAllocs()
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if half && i%2 == 0 {
				i-- // a redelivery of the event just sent
			}
			body := intakeBody(i)
			req := httptest.NewRequest(http.MethodPost, "/webhooks/ota", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Webhook-Id", fmt.Sprint("msg_", i))
			if err := v.Sign(req.Header, nil, body, time.Now()); err != nil {
				b.Error(err)
				return
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	// CPU per request, user and system: steadier than the wall clock on a shared machine.
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkIntakeBatch compares, on a real database file (synchronous FULL), one
// request carrying 50 events with 50 requests carrying one each: an op is 50 events
// either way, verified, keyed, claimed and stored durably before the answers. The
// batch must not cost more than the single deliveries it replaces.
func BenchmarkIntakeBatch(b *testing.B) {
	for _, mode := range []string{"Batch50", "Single50"} {
		b.Run(mode, func(b *testing.B) { benchIntakeBatch(b, mode == "Batch50") })
	}
}

func benchIntakeBatch(b *testing.B, batched bool) {
	const items = 50
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{intakeSecret}})
	if err != nil {
		b.Fatal(err)
	}
	src := receiver.Source{
		Name:        "ota",
		Verifier:    v,
		Keys:        receiver.KeySpec{EventID: []string{"/event_id"}},
		TTL:         24 * time.Hour,
		AmountField: []string{"/refund/amount"},
	}
	if batched {
		src.Batch = "/events"
	}
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "intake.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db})
	mux := http.NewServeMux()
	rc.Register(mux)

	send := func(n int64, body []byte) bool {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/ota", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Id", fmt.Sprint("msg_", n))
		if err := v.Sign(req.Header, nil, body, time.Now()); err != nil {
			b.Error(err)
			return false
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Errorf("status %d: %s", rec.Code, rec.Body)
			return false
		}
		return true
	}

	var n atomic.Int64
	b.SetParallelism(4) // a few senders on 2 cores
	b.ReportAllocs()
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var body []byte
		for pb.Next() {
			first := n.Add(items) - items
			if batched {
				body = append(body[:0], `{"events":[`...)
				for i := range int64(items) {
					if i > 0 {
						body = append(body, ',')
					}
					body = append(body, intakeBody(first+i)...)
				}
				body = append(body, "]}"...)
				if !send(first, body) {
					return
				}
				continue
			}
			for i := range int64(items) {
				if !send(first+i, intakeBody(first+i)) {
					return
				}
			}
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*items), "ns/event")
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N*items), "cpu-µs/event")
}
