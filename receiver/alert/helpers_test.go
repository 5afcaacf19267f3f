package alert_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// hookSecret signs the webhook channel's notifications in tests.
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// fixture is a database on a moved clock, and an engine on it.
type fixture struct {
	db    *sqlite.DB
	clock *storagetest.Clock
	logs  *syncBuffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := storagetest.Open(t)
	clock := storagetest.NewClock(t0)
	db.Now = clock.Now
	return &fixture{db: db, clock: clock, logs: &syncBuffer{}}
}

// engine builds an engine over the fixture's database with rules and channels; edit
// may change the config before it is built.
func (f *fixture) engine(t *testing.T, rules []alert.Rule, channels []*alert.Channel, edit ...func(*alert.Config)) *alert.Engine {
	t.Helper()
	var names []string
	for _, c := range channels {
		names = append(names, c.Name())
	}
	for i := range rules {
		rules[i] = rules[i].WithDefaults()
	}
	if err := alert.CheckRules(rules, []string{"ota", "cm"}, names); err != nil {
		t.Fatal(err)
	}
	cfg := alert.Config{
		Store: f.db, Rules: rules, Channels: channels, Sources: []string{"ota", "cm"},
		Now: f.clock.Now, Logger: slog.New(slog.NewTextHandler(f.logs, nil)),
		Ready: func(context.Context) error { return nil }, DiskFree: func() (uint64, error) { return 1 << 40, nil },
	}
	for _, e := range edit {
		e(&cfg)
	}
	e, err := alert.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// evaluate evaluates the rules once and sends what is due, failing the test on an error.
func (f *fixture) evaluate(t *testing.T, e *alert.Engine) {
	t.Helper()
	err := e.Evaluate(context.Background())
	e.WaitDirect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// settle evaluates once, then again once the default hold has passed: a condition
// clear at both resolves its alert.
func (f *fixture) settle(t *testing.T, e *alert.Engine) {
	t.Helper()
	f.evaluate(t, e)
	f.clock.Add(alert.DefaultClearFor)
	f.evaluate(t, e)
}

// alerts returns every alert, newest first.
func (f *fixture) alerts(t *testing.T) []storage.Alert {
	t.Helper()
	as, err := f.db.Alerts(context.Background(), storage.AlertFilter{State: "all"})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// execSQL changes the database file as another part of hookdedup would (a column this
// package only reads), through a connection of its own.
func execSQL(t *testing.T, db *sqlite.DB, query string, args ...any) {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// hook is a webhook receiver that verifies each notification's signature with the
// project's own verifier, and answers 500 to the first fail requests.
type hook struct {
	srv *httptest.Server

	mu       sync.Mutex
	fail     int
	requests int
	got      []hookPayload
	ids      []string
	badSigs  []error
}

type hookPayload struct {
	Type string `json:"type"`
	Data struct {
		ID          int64  `json:"id"`
		Rule        string `json:"rule"`
		Kind        string `json:"kind"`
		Subject     string `json:"subject"`
		Summary     string `json:"summary"`
		Value       string `json:"value"`
		Text        string `json:"text"`
		ResolvedBy  string `json:"resolved_by"`
		RuleRemoved bool   `json:"rule_removed"`
	} `json:"data"`
}

func newHook(t *testing.T, fail int) *hook {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{hookSecret}})
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{fail: fail}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.requests++
		if err := v.Verify(r.Header, r.URL.Query(), body, time.Now()); err != nil {
			h.badSigs = append(h.badSigs, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if h.fail > 0 {
			h.fail--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var p hookPayload
		if err := json.Unmarshal(body, &p); err != nil {
			h.badSigs = append(h.badSigs, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.got = append(h.got, p)
		h.ids = append(h.ids, r.Header.Get("Webhook-Id"))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) payloads() []hookPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookPayload(nil), h.got...)
}

func (h *hook) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.badSigs {
		t.Errorf("webhook receiver refused a notification: %v", err)
	}
}

func (h *hook) channel(t *testing.T, name string) *alert.Channel {
	t.Helper()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeWebhook, URL: h.srv.URL + "/alerts",
		Secrets: []string{hookSecret}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// slack is an incoming-webhook receiver: it takes {"text": ...} at a path that holds
// its credential, as Slack's and Mattermost's do.
type slack struct {
	srv  *httptest.Server
	path string

	mu    sync.Mutex
	texts []string
	bad   []string
}

func newSlack(t *testing.T) *slack {
	t.Helper()
	s := &slack{path: "/hooks/T000/B000/XXXXsecretXXXX"}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var p map[string]any
		dec := json.NewDecoder(r.Body)
		if r.URL.Path != s.path || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&p) != nil {
			s.bad = append(s.bad, r.URL.Path)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		text, ok := p["text"].(string)
		if !ok || len(p) != 1 {
			s.bad = append(s.bad, fmt.Sprint(p))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.texts = append(s.texts, text)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *slack) url() string { return s.srv.URL + s.path }

func (s *slack) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.texts...)
}

func (s *slack) channel(t *testing.T, name string) *alert.Channel {
	t.Helper()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeSlack, Secrets: []string{s.url()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuffer is a log that a test reads while others write it.
type syncBuffer = storagetest.LogBuffer

// count is how many requests the receiver got, refused ones included.
func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests
}

// renameAside moves a database file away from its path, as an operator's mistake would.
func renameAside(path string) error { return os.Rename(path, path+".aside") }

// payloadIDs are the webhook-id headers of the notifications taken.
func (h *hook) payloadIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}
