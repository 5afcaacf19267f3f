package receiver_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// switchDownstream is a real HTTP downstream that answers 500 until it is switched to
// 200, and keeps every hand-off it sees.
type switchDownstream struct {
	srv *httptest.Server

	mu   sync.Mutex
	up   bool
	seen []seenHandOff
}

type seenHandOff struct {
	key, body string
	status    int
}

func newSwitchDownstream(t *testing.T, up bool) *switchDownstream {
	ds := &switchDownstream{up: up}
	ds.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ds.mu.Lock()
		status := http.StatusInternalServerError
		if ds.up {
			status = http.StatusOK
		}
		ds.seen = append(ds.seen, seenHandOff{key: r.Header.Get("Idempotency-Key"), body: string(body), status: status})
		ds.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(ds.srv.Close)
	return ds
}

func (ds *switchDownstream) setUp() { ds.mu.Lock(); ds.up = true; ds.mu.Unlock() }

// handOffs returns the bodies handed off under one Idempotency-Key, in order.
func (ds *switchDownstream) handOffs(key string) []seenHandOff {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []seenHandOff
	for _, h := range ds.seen {
		if h.key == key {
			out = append(out, h)
		}
	}
	return out
}

// runDispatcher runs a dispatcher on clock over db until the returned stop is called
// (or the test ends); stop waits for the attempts in flight.
func runDispatcherAt(t *testing.T, db *sqlite.DB, clock *hostileClock, src receiver.Source) (stop func()) {
	t.Helper()
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{src},
		FirstBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// intakeAt serves the webhook intake over db on clock, as serve does.
func intakeAt(t *testing.T, db *sqlite.DB, clock *hostileClock, src receiver.Source) *testEnv {
	t.Helper()
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Now: clock.Now})
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &testEnv{db: db, srv: srv, src: src}
}

// sweepWatch is the real database, telling when a retention walk has reached its end.
type sweepWatch struct {
	*sqlite.DB
	walked chan struct{}
}

func (s sweepWatch) SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (int64, storage.SweepCursor, error) {
	if from == (storage.SweepCursor{}) {
		// As serve's roll-up loop would have: retention deletes nothing not counted.
		if _, err := s.DB.RollupStats(ctx, 10000); err != nil {
			return 0, from, err
		}
	}
	n, next, err := s.DB.SweepDeliveries(ctx, now, cutoff, from, limit)
	if next.Done() || err != nil {
		select {
		case s.walked <- struct{}{}:
		default:
		}
	}
	return n, next, err
}

// sweepOnce runs the background sweeps with retention until they have walked every
// delivery once.
func sweepOnce(t *testing.T, db *sqlite.DB, clock *hostileClock, retention time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := sweepWatch{DB: db, walked: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		receiver.RunSweeps(ctx, w, receiver.SweepConfig{Every: time.Hour, Retention: retention, Batch: 2, Now: clock.Now},
			receiver.NewMetrics(nil), slog.New(slog.DiscardHandler))
		close(done)
	}()
	select {
	case <-w.walked:
	case <-time.After(10 * time.Second):
		t.Fatal("the retention sweep did not finish within 10 s")
	}
	cancel()
	<-done
}

// TestDispatch_RetentionKeepsOwedPayload: with retention shorter than an outage of the
// downstream, a restart and a new event in between, the key that waited is handed off
// with its own payload once the downstream is back, and the new event with its own.
func TestDispatch_RetentionKeepsOwedPayload(t *testing.T) {
	const first = `{"property_id":"HTL-LIS-01","booking_id":"BK-1","status":"cancelled","refund":{"amount":182.5}}`
	const second = `{"property_id":"HTL-LIS-01","booking_id":"BK-2","status":"confirmed"}`
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	clock := &hostileClock{}
	open := func() *sqlite.DB {
		db, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Now = clock.Now
		return db
	}
	ds := newSwitchDownstream(t, false)
	src := forwardSource(t, ds.srv.URL, 1000)

	db := open()
	intake := intakeAt(t, db, clock, src)
	stop := runDispatcherAt(t, db, clock, src)
	if code, a, _ := intake.post(t, "ota", "evt_first", first, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("first event: %d %+v", code, a)
	}
	for deadline := time.Now().Add(10 * time.Second); len(ds.handOffs("ota:evt_first")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first event was not handed off within 10 s")
		}
	}
	code, dup, _ := intake.post(t, "ota", "evt_first", first, nil)
	if code != 200 || dup.Status != "duplicate" {
		t.Fatalf("first event again: %d %+v", code, dup)
	}
	stop()
	intake.srv.Close()

	// Four seconds later a sweep with a three-second retention, then a restart. The
	// sweep deletes what is not owed (the duplicate) and keeps the payload still owed.
	clock.Add(4 * time.Second)
	sweepOnce(t, db, clock, 3*time.Second)
	dupID, _ := strconv.ParseInt(dup.Delivery, 10, 64)
	if _, err := db.Delivery(context.Background(), dupID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the duplicate, past retention: %v, want swept", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	intake = intakeAt(t, db, clock, src)
	if code, a, _ := intake.post(t, "ota", "evt_second", second, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("second event: %d %+v", code, a)
	}
	ds.setUp()
	runDispatcherAt(t, db, clock, src)

	waitState(t, db, "evt_second", storage.StateProcessed)
	c := waitState(t, db, "evt_first", storage.StateProcessed)
	for key, body := range map[string]string{"ota:evt_first": first, "ota:evt_second": second} {
		got := ds.handOffs(key)
		if len(got) == 0 || got[len(got)-1].status != http.StatusOK {
			t.Fatalf("%s: hand-offs %+v, want the last one taken", key, got)
		}
		for _, h := range got {
			if h.body != body {
				t.Fatalf("%s was handed off with body %q, want %q", key, h.body, body)
			}
		}
	}
	atts, err := db.Attempts(context.Background(), "ota", "evt_first")
	if err != nil || len(atts) == 0 || atts[len(atts)-1].Delivery != c.FirstDelivery {
		t.Fatalf("attempts of evt_first %+v, %v; want them made with delivery %d", atts, err, c.FirstDelivery)
	}
}

// TestDispatch_PayloadMissingOrForeign: a job whose payload is gone, or whose claim
// names another key's delivery (as a database that once reused ids can hold), fails its
// key at once, saying why, and nothing is sent under that key.
func TestDispatch_PayloadMissingOrForeign(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	ds := newSwitchDownstream(t, true)
	accept(t, db, "gone", `{"booking_id":"BK-1"}`)
	accept(t, db, "foreign", `{"booking_id":"BK-2"}`)
	other := accept(t, db, "other", `{"booking_id":"BK-3"}`)

	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	gone, err := db.Claim(ctx, "ota", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM deliveries WHERE id = ?`, gone.FirstDelivery); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE claims SET first_delivery = ? WHERE key = 'foreign'`, other.ID); err != nil {
		t.Fatal(err)
	}

	startDispatcher(t, db, forwardSource(t, ds.srv.URL, 10))
	waitState(t, db, "other", storage.StateProcessed)
	for key, want := range map[string]string{"gone": "is no longer stored", "foreign": "belongs to ota/other"} {
		c := waitState(t, db, key, storage.StateFailed)
		atts, err := db.Attempts(ctx, "ota", key)
		if err != nil || len(atts) != 1 || !strings.Contains(atts[0].Error, want) || !strings.Contains(atts[0].Error, "nothing was sent") {
			t.Errorf("%s: attempts %+v, %v; want one whose error says %q", key, atts, err, want)
		}
		if !strings.Contains(c.LastError, want) {
			t.Errorf("%s: last error %q, want it to say %q", key, c.LastError, want)
		}
		if got := ds.handOffs("ota:" + key); len(got) != 0 {
			t.Errorf("%s was handed off: %+v", key, got)
		}
	}
	if got := ds.handOffs("ota:other"); len(got) != 1 || got[0].body != `{"booking_id":"BK-3"}` {
		t.Errorf("other: hand-offs %+v, want its own body once", got)
	}
}
