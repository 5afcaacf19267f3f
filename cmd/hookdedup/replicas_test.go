package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// replicaSet is serve replicas on one PostgreSQL database, each in a directory of its
// own (its config and log), and the URLs of those that are up.
type replicaSet struct {
	t        *testing.T
	base     string
	database string
	sinkURL  string

	mu   sync.Mutex
	live map[int]*server // incarnation -> its process
}

// start starts incarnation inc: a replica whose hand-offs name inc.
func (rs *replicaSet) start(inc int) *server {
	rs.t.Helper()
	dir := filepath.Join(rs.base, fmt.Sprintf("replica-%03d", inc))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		rs.t.Fatal(err)
	}
	cfg := fmt.Sprintf("database = %q\n", rs.database) + crashConfig(rs.sinkURL, inc)
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(cfg), 0o600); err != nil {
		rs.t.Fatal(err)
	}
	s := startLogged(rs.t, dir, "serve.log", nil)
	rs.mu.Lock()
	rs.live[inc] = s
	rs.mu.Unlock()
	return s
}

// kill SIGKILLs incarnation inc and takes it out of the traffic first.
func (rs *replicaSet) kill(inc int) {
	rs.mu.Lock()
	s := rs.live[inc]
	delete(rs.live, inc)
	rs.mu.Unlock()
	s.kill(rs.t)
}

// pick is the URL of a live replica, chosen at random; nil when none is up.
func (rs *replicaSet) pick() *string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.live) == 0 {
		return nil
	}
	incs := slices.Sorted(maps.Keys(rs.live))
	u := rs.live[incs[rand.IntN(len(incs))]].url
	return &u
}

// urls are the live replicas' URLs.
func (rs *replicaSet) urls() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []string
	for _, s := range rs.live {
		out = append(out, s.url)
	}
	return out
}

// TestReplicas_KillNineLosesNothing: three serve replicas on one PostgreSQL database.
// Each event's deliveries go to all three at once: exactly one is accepted, whichever
// replica it reaches. Then the crash test's traffic, spread over the replicas, while one
// of them is SIGKILLed and restarted again and again: every delivery answered 200 is
// stored, every accepted key reaches the downstream, and a key handed off twice had its
// first hand-off cut by a kill, under the same Idempotency-Key, taken over by another
// replica once its lease ran out.
func TestReplicas_KillNineLosesNothing(t *testing.T) {
	kills, long := crashKillCount(t)
	t.Parallel() // its own serve processes, directories and database
	sink := &crashSink{}
	sinkSrv := httptest.NewServer(sink)
	defer sinkSrv.Close()
	rs := &replicaSet{t: t, base: t.TempDir(), database: postgrestest.NewDatabase(t), sinkURL: sinkSrv.URL, live: map[int]*server{}}
	traffic := &crashTraffic{t: t, v: standardWebhooks(t, testSecret), client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16},
	}, pickURL: rs.pick}

	// Two replicas that live throughout (incarnations 1000 and 1001), started together
	// on the empty database: they migrate it once between them. The third is the one
	// killed: incarnations 0, 1, … .
	var wg sync.WaitGroup
	for _, inc := range []int{1000, 1001, 0} {
		wg.Go(func() { rs.start(inc) })
	}
	wg.Wait()

	// One event, three deliveries at once, one to each replica.
	urls := rs.urls()
	accepted := 0
	for range 30 {
		ev := traffic.newEvent()
		answers := make([]crashSend, len(urls))
		var sends sync.WaitGroup
		for i, u := range urls {
			sends.Go(func() {
				answers[i] = traffic.deliverTo(ev, u)
			})
		}
		sends.Wait()
		n := 0
		for _, a := range answers {
			if a.code != 200 {
				t.Fatalf("%s: answered %d %v (%s)", ev.key, a.code, a.answer, a.transport)
			}
			if a.answer["status"] == "accepted" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d of 3 concurrent deliveries accepted, want 1: %v", ev.key, n, answers)
		}
		accepted += n
	}

	const senders = 6
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopSenders := func() { stopOnce.Do(func() { close(stop) }) }
	defer stopSenders()
	var senderWG sync.WaitGroup
	for range senders {
		senderWG.Go(func() { traffic.sender(stop) })
	}
	killedAt := map[int]time.Time{}
	began := time.Now()
	inc := 0
	for ; inc < kills; inc++ {
		// A random moment: the sleep is the point.
		time.Sleep(time.Duration(50+rand.IntN(1450)) * time.Millisecond)
		rs.kill(inc)
		killedAt[inc] = time.Now()
		rs.start(inc + 1)
	}
	traffic.mu.Lock()
	finalFrom := len(traffic.sends)
	traffic.mu.Unlock()
	storagetest.Eventually(t, time.Minute, func() error {
		if n := traffic.answeredSince(finalFrom); n < 50 {
			return fmt.Errorf("the replicas answered %d deliveries since the last kill, want 50", n)
		}
		return nil
	})
	stopSenders()
	senderWG.Wait()
	trafficTime := time.Since(began)

	traffic.mu.Lock()
	events := slices.Clone(traffic.events)
	traffic.mu.Unlock()
	storagetest.Eventually(t, 2*time.Minute, func() error {
		var unanswered *crashEvent
		for _, ev := range events {
			if !ev.acked.Load() {
				if s, _ := traffic.deliver(ev); s.code != 200 {
					unanswered = ev
				}
			}
		}
		if unanswered != nil {
			return fmt.Errorf("%s/%s still unanswered", unanswered.source, unanswered.key)
		}
		return nil
	})

	ctx := context.Background()
	db, err := postgres.Open(ctx, rs.database, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Eventually(t, 3*time.Minute, func() error {
		processing, err := db.ListKeys(ctx, storage.KeyFilter{State: storage.StateProcessing, Limit: 1})
		if err != nil {
			return err
		}
		if len(processing) > 0 {
			return fmt.Errorf("keys are still processing, e.g. %+v", processing[0])
		}
		return nil
	})
	rs.mu.Lock()
	live := slices.Collect(maps.Values(rs.live))
	rs.mu.Unlock()
	for _, s := range live {
		s.stop(t)
	}
	dirs, _ := filepath.Glob(filepath.Join(rs.base, "replica-*"))
	for _, dir := range dirs {
		checkLogs(t, dir)
	}
	r := reckon(t, db, traffic, sink, events, killedAt, nil)
	form := "short"
	if long {
		form = "long"
	}
	t.Logf("\nreplicas test (%s form): 3 replicas on PostgreSQL, %d SIGKILLs of one, %d senders, traffic for %s; 30 events sent to all 3 at once, %d accepted\n%s",
		form, kills, senders, trafficTime.Round(time.Millisecond), accepted, r)
}

// TestReplicas_PostgresRestart: two replicas under traffic while PostgreSQL stops at
// once (as a crash would) and starts again. While it is down, /readyz is 503 and
// intake answers 503 with Retry-After, never 200; once it is back, both replicas
// answer 200 again by themselves; and at the end nothing answered 200 is lost, every
// accepted key reached the downstream.
func TestReplicas_PostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a PostgreSQL cluster of its own, stopped and started under traffic")
	}
	t.Parallel() // its own cluster, serve processes and directories
	cluster := postgrestest.NewCluster(t)
	sink := &crashSink{}
	sinkSrv := httptest.NewServer(sink)
	defer sinkSrv.Close()
	rs := &replicaSet{t: t, base: t.TempDir(), database: cluster.NewDatabase(t, "hookdedup"), sinkURL: sinkSrv.URL, live: map[int]*server{}}
	traffic := &crashTraffic{t: t, v: standardWebhooks(t, testSecret), client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16},
	}, pickURL: rs.pick}
	rs.start(0)
	rs.start(1)
	ready := func(url string) int {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	stop := make(chan struct{})
	var stopOnce sync.Once
	stopSenders := func() { stopOnce.Do(func() { close(stop) }) }
	defer stopSenders()
	var senderWG sync.WaitGroup
	for range 4 {
		senderWG.Go(func() { traffic.sender(stop) })
	}
	storagetest.Eventually(t, time.Minute, func() error {
		if n := traffic.answeredSince(0); n < 100 {
			return fmt.Errorf("%d deliveries answered before the outage, want 100", n)
		}
		return nil
	})

	cluster.Stop(t)
	downAt := time.Now()
	traffic.mu.Lock()
	downFrom := len(traffic.sends)
	traffic.mu.Unlock()
	storagetest.Eventually(t, time.Minute, func() error {
		for _, u := range rs.urls() {
			if code := ready(u); code != http.StatusServiceUnavailable {
				return fmt.Errorf("/readyz of %s with PostgreSQL down: %d, want 503", u, code)
			}
		}
		traffic.mu.Lock()
		defer traffic.mu.Unlock()
		for _, s := range traffic.sends[downFrom:] {
			if s.code == http.StatusServiceUnavailable && s.retryAfter != "" {
				return nil
			}
		}
		return fmt.Errorf("no delivery answered 503 with Retry-After since PostgreSQL stopped (%d sent)", len(traffic.sends)-downFrom)
	})
	// Down for a moment longer: the point is the outage, not its length.
	time.Sleep(2 * time.Second)
	cluster.Start(t)
	upAt := time.Now()
	traffic.mu.Lock()
	upFrom := len(traffic.sends)
	traffic.mu.Unlock()
	storagetest.Eventually(t, 2*time.Minute, func() error {
		for _, u := range rs.urls() {
			if code := ready(u); code != http.StatusOK {
				return fmt.Errorf("/readyz of %s with PostgreSQL back: %d, want 200", u, code)
			}
		}
		if n := traffic.answeredSince(upFrom); n < 100 {
			return fmt.Errorf("%d deliveries answered 200 since PostgreSQL came back, want 100", n)
		}
		return nil
	})
	stopSenders()
	senderWG.Wait()

	traffic.mu.Lock()
	events := slices.Clone(traffic.events)
	traffic.mu.Unlock()
	storagetest.Eventually(t, 2*time.Minute, func() error {
		for _, ev := range events {
			if !ev.acked.Load() {
				if s, _ := traffic.deliver(ev); s.code != 200 {
					return fmt.Errorf("%s/%s still unanswered", ev.source, ev.key)
				}
			}
		}
		return nil
	})
	ctx := context.Background()
	db, err := postgres.Open(ctx, rs.database, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Eventually(t, 3*time.Minute, func() error {
		processing, err := db.ListKeys(ctx, storage.KeyFilter{State: storage.StateProcessing, Limit: 1})
		if err != nil {
			return err
		}
		if len(processing) > 0 {
			return fmt.Errorf("keys are still processing, e.g. %+v", processing[0])
		}
		return nil
	})
	for _, s := range slices.Collect(maps.Values(rs.live)) {
		s.stop(t)
	}
	r := reckon(t, db, traffic, sink, events, nil, []time.Time{downAt, upAt})
	t.Logf("\nPostgreSQL restarted under traffic (2 replicas, 4 senders):\n%s", r)
}
