package alert_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEngine_DirectSendCutByStopNotCountedFailed: an alert told straight away whose
// last try a stop cuts short is not given up: it is told through the outbox once the
// database takes it. hookdedup_alert_notifications_total counts "failed" only for a
// notification given up, so the cut try is not counted, as the outbox does not count
// one; otherwise a channel that works would show as failing after every restart.
func TestEngine_DirectSendCutByStopNotCountedFailed(t *testing.T) {
	f := newFixture(t)
	var (
		mu       sync.Mutex
		requests int
	)
	third, ended := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if n == 3 {
			close(third)
		}
		select { // hangs until the sender gives up on it, or the test ends
		case <-r.Context().Done():
		case <-ended:
		}
	}))
	defer srv.Close()
	defer close(ended)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeWebhook, URL: srv.URL + "/alerts",
		Secrets: []string{hookSecret}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var told notified
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = nil // the real Ping
			c.Notified = told.add
		})
	if err := renameAside(f.db.Path()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := e.Evaluate(ctx); err == nil {
		t.Fatal("Evaluate stored an alert in a database whose file is gone")
	}
	<-third
	stop()
	e.WaitDirect()
	if got := told.String(); got != "ops retry, ops retry" {
		t.Errorf("results told (the metric's): %s; want ops retry, ops retry (the cut try is no give-up)", got)
	}
}
