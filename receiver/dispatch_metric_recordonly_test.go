package receiver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_MetricCountsHandOffsOnly: hookdedup_dispatch_attempts_total counts
// hand-offs to a downstream. A reprocessed key of a record-only source is settled with
// nothing sent, and is no attempt (the key's count of attempts leaves it out too): the
// metric must not show it as a success, or a source that forwards nothing would look as
// if its downstream took every event. A real hand-off of the same run still counts.
func TestDispatch_MetricCountsHandOffsOnly(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer down.Close()
	db := storagetest.Open(t)
	ctx := context.Background()
	m := receiver.NewMetrics(nil)
	ledger := otaSource(t)
	ledger.Name = "ledger" // no forward_url: record only
	pms := forwardSource(t, down.URL, 3)
	pms.Name = "pms"
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{ledger, pms}, Metrics: m,
		FirstBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond, RecordOnlyAfter: 100 * time.Millisecond})
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(dctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	if err := db.Record(ctx, &storage.Delivery{Source: "ledger", Key: "k", KeyMethod: "event_id", PayloadHash: "h", Body: []byte(`{}`)},
		storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ledger", Key: "k", Actor: "t", Reason: "r", Reprocess: true}); err != nil {
		t.Fatal(err)
	}
	storagetest.Record(t, db, &storage.Delivery{Source: "pms", Key: "p", KeyMethod: "event_id", PayloadHash: "h",
		ContentType: "application/json", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	for _, k := range []struct{ source, key string }{{"ledger", "k"}, {"pms", "p"}} {
		storagetest.Eventually(t, 10*time.Second, func() error {
			c, err := db.Claim(ctx, k.source, k.key)
			if err == nil && c.State != storage.StateProcessed {
				return io.ErrNoProgress
			}
			return err
		})
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	s := rec.Body.String()
	if strings.Contains(s, `hookdedup_dispatch_attempts_total{result="success",source="ledger"}`) {
		t.Errorf("a record-only settlement is counted as a hand-off:\n%s", grepLines(s, "hookdedup_dispatch_attempts_total"))
	}
	if !strings.Contains(s, `hookdedup_dispatch_attempts_total{result="success",source="pms"} 1`) {
		t.Errorf("the hand-off to pms's downstream is not counted once:\n%s", grepLines(s, "hookdedup_dispatch_attempts_total"))
	}
}
