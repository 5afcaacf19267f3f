package alert_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOutage: a downstream that fails K times in a row produces one alert, told once to
// each channel (a signed webhook, a slack incoming webhook, email over a real SMTP
// server), however long it lasts; when it takes events again, the alert resolves and
// each channel is told once more.
func TestOutage(t *testing.T) {
	smtp := startSMTP(t)
	h := newHook(t, 0)
	s := newSlack(t)

	var down atomic.Bool
	down.Store(true)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer downstream.Close()

	db := storagetest.Open(t)
	none, err := signature.New(signature.Config{Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	d := receiver.NewDispatcher(receiver.DispatchConfig{
		Store: db, Poll: 10 * time.Millisecond, FirstBackoff: time.Millisecond,
		Sources: []receiver.Source{{Name: "ota", Verifier: none, ForwardURL: downstream.URL, MaxAttempts: 1000,
			AttemptTimeout: 5 * time.Second, MaxBackoff: 5 * time.Millisecond}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	logs := &syncBuffer{}
	f := &fixture{db: db, clock: storagetest.NewClock(time.Now()), logs: logs}
	e := f.engine(t, []alert.Rule{{Name: "downstream", Kind: alert.KindDownstreamFailing, Times: 3, Channels: []string{"ops", "chat", "mail"}}},
		[]*alert.Channel{h.channel(t, "ops"), s.channel(t, "chat"), smtp.channel(t, "mail")})

	recordDispatched(t, db, "ota", "booking-1")
	d.Wake()
	storagetest.Eventually(t, 30*time.Second, func() error {
		streaks, err := db.FailingStreaks(ctx, []string{"ota"}, 10)
		if err != nil || streaks["ota"] < 10 {
			return fmt.Errorf("failing streak %v (%v)", streaks, err)
		}
		return nil
	})
	for range 5 { // the outage lasts: evaluations go on
		f.evaluate(t, e)
	}
	wantEvents(t, h, "alert.opened downstream ota")
	if texts := s.received(); len(texts) != 1 || !strings.Contains(texts[0], "alert opened: downstream on ota") {
		t.Errorf("slack got %q", texts)
	}
	if msgs := smtp.messages(t); len(msgs) != 1 || !strings.Contains(msgs[0].Data, "downstream failed") {
		t.Errorf("email got %+v", msgs)
	}

	down.Store(false)
	storagetest.Eventually(t, 30*time.Second, func() error {
		c, err := db.Claim(ctx, "ota", "booking-1")
		if err != nil || c.State != storage.StateProcessed {
			return fmt.Errorf("key %+v (%v), want processed", c, err)
		}
		return nil
	})
	for range 3 {
		f.evaluate(t, e)
	}
	f.settle(t, e)
	wantEvents(t, h, "alert.opened downstream ota", "alert.resolved downstream ota")
	if texts := s.received(); len(texts) != 2 || !strings.Contains(texts[1], "resolved by itself") {
		t.Errorf("slack got %q", texts)
	}
	if msgs := smtp.messages(t); len(msgs) != 2 || !strings.Contains(msgs[1].Data, "alert resolved") {
		t.Errorf("email got %d messages", len(msgs))
	}
	for _, secret := range []string{hookSecret, s.path, smtpPassword} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a secret (%q):\n%s", secret, logs.String())
		}
	}
}

// TestSecretsNotLogged: a slack channel that cannot be reached is logged and retried,
// and neither the log nor the stored error holds its URL's credential.
func TestSecretsNotLogged(t *testing.T) {
	f := newFixture(t)
	s := newSlack(t)
	url := s.url()
	c := s.channel(t, "chat")
	s.srv.Close()
	if strings.Contains(c.Target(), s.path) {
		t.Fatalf("Target() = %q shows the credential", c.Target())
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"chat"}}}, []*alert.Channel{c},
		func(c *alert.Config) { c.Ready = func(context.Context) error { return fmt.Errorf("down") } })
	f.evaluate(t, e)
	a := f.alerts(t)[0]
	if a.LastNotificationError == "" {
		t.Fatal("no error recorded for an unreachable channel")
	}
	if !strings.Contains(f.logs.String(), "will retry") {
		t.Fatalf("no retry logged:\n%s", f.logs.String())
	}
	for _, where := range []string{f.logs.String(), a.LastNotificationError} {
		if strings.Contains(where, "XXXXsecretXXXX") || strings.Contains(where, url) {
			t.Errorf("the slack URL's credential is in %q", where)
		}
	}
}

// TestSlackPayload: a slack channel posts {"text": ...}, one line saying what happened
// and the alert's summary.
func TestSlackPayload(t *testing.T) {
	f := newFixture(t)
	s := newSlack(t)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"chat"}}},
		[]*alert.Channel{s.channel(t, "chat")},
		func(c *alert.Config) {
			c.Ready = func(context.Context) error { return fmt.Errorf("disk full") }
			c.ConsoleURL = "https://console.hotel.example"
		})
	f.evaluate(t, e)
	texts := s.received()
	if len(texts) != 1 {
		t.Fatalf("slack got %q (refused: %v)", texts, s.bad)
	}
	for _, want := range []string{"hookdedup alert opened: db\n", "disk full", "https://console.hotel.example/alerts"} {
		if !strings.Contains(texts[0], want) {
			t.Errorf("text %q lacks %q", texts[0], want)
		}
	}
}

// TestChannel_RedirectIsFailure: a channel's URL answering with a redirect has not taken
// the notification; the POST is not turned into a GET of the other address, and the
// error says that it was a redirect, not followed, without quoting where it pointed
// (a URL that may hold a token), rather than a bare status an operator reads as an
// outage of the receiver.
func TestChannel_RedirectIsFailure(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere?token=TOPSECRET", http.StatusFound)
	}))
	defer srv.Close()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "chat", Type: alert.TypeSlack, URL: srv.URL + "/hook"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), alert.Message{ID: "x", Event: storage.AlertOpened})
	if err == nil || !strings.Contains(err.Error(), "HTTP 302") || gets.Load() != 0 {
		t.Fatalf("Send = %v (%d GETs), want a failure on the 302", err, gets.Load())
	}
	if !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "TOPSECRET") {
		t.Errorf("Send = %v; want it to say that a redirect was not followed, without its location", err)
	}
}
