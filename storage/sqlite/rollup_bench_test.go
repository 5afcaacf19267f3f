package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// BenchmarkRollup measures what serve's roll-up (the dashboard's hourly totals and the
// ledger's daily ones) costs a delivery stored by intake: each round stores 20,000
// deliveries (half of them duplicates, a refund amount each, 400 properties) through
// 64 concurrent callers, then rolls them up in serve's steps of 5,000. ns/op is a whole
// round; cpu-µs is the process's CPU during the roll-ups alone, per delivery.
func BenchmarkRollup(b *testing.B) {
	const round, step = 20000, 5000
	ctx := context.Background()
	db := benchOpen(b, "FULL")
	claim := storage.ClaimOptions{TTL: 24 * time.Hour}
	var n atomic.Int64
	var cpu time.Duration
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		end := n.Load() + round
		for range 64 {
			wg.Go(func() {
				for {
					i := n.Add(1)
					if i > end {
						return
					}
					if i%2 == 0 {
						i-- // the key the previous caller claimed
					}
					d := benchDelivery(benchKey(i))
					d.Property, d.Currency = fmt.Sprintf("PROP-%06d", i%400), "EUR"
					if err := db.Record(ctx, d, claim); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		n.Store(end)
		c0 := benchCPU()
		for {
			k, err := db.RollupStats(ctx, step)
			if err != nil {
				b.Fatal(err)
			}
			if k < step {
				break
			}
		}
		for {
			k, err := db.RollupLedger(ctx, step)
			if err != nil {
				b.Fatal(err)
			}
			if k < step {
				break
			}
		}
		cpu += benchCPU() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*round), "cpu-µs/delivery")
}
