package receiver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_RecordOnlySettledBesideHungDownstream: a source that forwards alone may
// hold every worker it shares with no other forwarding source, and with its downstream
// hung it held all 8 for its attempt_timeout: a record-only key reprocessed meanwhile
// (the console, `hookdedup release --reprocess`) waited that long to be settled. Its
// settlement is owed a worker as a forwarding source is: it is settled while every hung
// hand-off is still open, and the forwarding source still holds 8 attempts, as alone.
func TestDispatch_RecordOnlySettledBesideHungDownstream(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	hung := newHungDownstream(t)
	defer hung.release()
	src := forwardSource(t, hung.srv.URL, 10)
	src.AttemptTimeout = time.Minute
	ledger := otaSource(t) // no forward_url
	ledger.Name = "ledger"
	storagetest.Record(t, db, &storage.Delivery{Source: "ledger", Key: "k", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
	for n := range 12 {
		queue(t, db, "ota", fmt.Sprintf("evt_%d", n))
	}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{src, ledger},
		Poll: 50 * time.Millisecond, RecordOnlyAfter: 100 * time.Millisecond}) // the default workers
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(dctx); close(done) }()
	t.Cleanup(func() { hung.release(); cancel(); <-done })
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := hung.open(); n != 8 {
			return fmt.Errorf("%d hand-offs to the hung downstream under way; want 8, as a source that forwards alone holds", n)
		}
		return nil
	})

	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ledger", Key: "k", Actor: "t", Reason: "r", Reprocess: true}); err != nil {
		t.Fatal(err)
	}
	d.Wake()
	storagetest.Eventually(t, 10*time.Second, func() error {
		c, err := db.Claim(ctx, "ledger", "k")
		if err != nil {
			return err
		}
		if c.State != storage.StateProcessed {
			return fmt.Errorf("the reprocessed record-only key is %s while the hung downstream holds %d hand-offs; want it settled as processed",
				c.State, hung.open())
		}
		return nil
	})
	if atts, err := db.Attempts(ctx, "ledger", "k"); err != nil || len(atts) != 1 || !strings.Contains(atts[0].Response, "record only") {
		t.Errorf("attempts = %+v, %v; want the one record-only settlement", atts, err)
	}
	if n, ended := hung.open(), hung.ended(); n != 8 || ended != 0 {
		t.Errorf("%d hand-offs to the hung downstream open, %d ended; want its 8 still open", n, ended)
	}
}
