package receiver_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_RecordOnlySettlementFollowsRetention: a key of a source without
// forward_url that the dispatcher settles (queued at intake while another replica
// forwarded the source, or reprocessed) is never handed downstream: its settlement is
// not counted as an attempt, so its payload follows retention like any record-only
// key's, not kept for the key's ttl as one owed to a downstream.
func TestDispatch_RecordOnlySettlementFollowsRetention(t *testing.T) {
	db := storagetest.Open(t)
	clk := storagetest.NewClock(time.Now())
	db.Now = clk.Now
	src := otaSource(t) // no forward_url: record only
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{src},
		Poll: 20 * time.Millisecond, RecordOnlyAfter: 50 * time.Millisecond, Now: db.Clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	accept(t, db, "evt_ro", `{"id":"evt_ro"}`) // queued, as intake queues it while forwarded elsewhere (ttl 1 h)
	clk.Add(100 * time.Millisecond)
	d.Wake()
	c := waitState(t, db, "evt_ro", storage.StateProcessed)
	if as, _ := db.Attempts(context.Background(), "ota", "evt_ro"); len(as) != 1 || as[0].Status != 0 {
		t.Fatalf("attempts %+v; want the one record-only settlement, nothing sent", as)
	}
	cancel()
	<-done

	// Retention is 10 minutes; the key is still held (ttl 1 h) 20 minutes later.
	clk.Add(20 * time.Minute)
	enginetest.CatchUpRollups(t, db)
	var swept int64
	var from storage.SweepCursor
	for range 100 {
		n, next, err := db.SweepDeliveries(context.Background(), db.Now(), db.Now().Add(-10*time.Minute), from, 100)
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		if next.Done() {
			break
		}
		from = next
	}
	if swept != 1 {
		t.Fatalf("retention swept %d deliveries; want the record-only key's one delivery (attempts %d, never handed downstream)", swept, c.Attempts)
	}
}
