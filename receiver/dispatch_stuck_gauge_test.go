package receiver_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_StuckGaugeCountsEverySource: hookdedup_stuck_keys is what monitoring
// alerts on (events the downstream has not taken). The keys of a source the
// configuration no longer has (renamed or removed with events still owed) are stuck, as
// `keys --stuck` and the console list them: the gauge counts them too, and drops the
// source once none is left, rather than saying 0 while they wait.
func TestDispatch_StuckGaugeCountsEverySource(t *testing.T) {
	db := storagetest.Open(t)
	for _, key := range []string{"k1", "k2"} {
		storagetest.Record(t, db, &storage.Delivery{Source: "pms", Key: key, KeyMethod: "event_id", PayloadHash: "h",
			ContentType: "application/json", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	}
	time.Sleep(20 * time.Millisecond) // processing past stuck_after
	m := receiver.NewMetrics(nil)
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{forwardSource(t, "http://127.0.0.1:1/", 1)},
		StuckAfter: 10 * time.Millisecond, Metrics: m, Poll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	storagetest.Eventually(t, 5*time.Second, func() error {
		if s := scrape(); !strings.Contains(s, `hookdedup_stuck_keys{source="pms"} 2`) {
			return fmt.Errorf("metrics hold no stuck count of 2 for pms:\n%s", grepLines(s, "hookdedup_stuck_keys"))
		}
		return nil
	})
	for _, key := range []string{"k1", "k2"} {
		if _, err := db.ReleaseKey(context.Background(), storage.Release{Source: "pms", Key: key, Actor: "sam", Reason: "source removed",
			StuckBefore: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// The gauge is refreshed every 15 s.
	storagetest.Eventually(t, 20*time.Second, func() error {
		if s := scrape(); strings.Contains(s, `hookdedup_stuck_keys{source="pms"} 2`) {
			return fmt.Errorf("the released keys still count:\n%s", grepLines(s, "hookdedup_stuck_keys"))
		}
		return nil
	})
}

func grepLines(s, prefix string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}
