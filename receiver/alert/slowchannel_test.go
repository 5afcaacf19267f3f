package alert_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// hangingHook is a webhook receiver that takes the connection and never answers (a
// receiver whose backend hangs), until the test ends.
func hangingHook(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, &got
}

func hangingChannel(t *testing.T, name, url string, timeout time.Duration) *alert.Channel {
	t.Helper()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeWebhook, URL: url + "/alerts",
		Secrets: []string{hookSecret}, Timeout: timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond every 20 ms for up to limit and returns how long it took, or
// false.
func waitFor(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), false
}

// TestAlerts_HangingChannelHoldsUpNoOther: one channel whose receiver hangs (until its
// timeout, which may be set up to 4 minutes) holds up neither the rules' evaluation
// nor another rule's alert to another channel: a channel's timeout bounds its own sends.
func TestAlerts_HangingChannelHoldsUpNoOther(t *testing.T) {
	f := newFixture(t)
	slowSrv, slowGot := hangingHook(t)
	fast := newHook(t, 0)
	var mu sync.Mutex
	var ready error
	free := uint64(1 << 40)
	e := f.engine(t, []alert.Rule{
		{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"pager"}},
		{Name: "disk", Kind: alert.KindDiskSpace, MinFree: 1 << 30, Channels: []string{"ops"}},
	}, []*alert.Channel{hangingChannel(t, "pager", slowSrv.URL, 6*time.Second), fast.channel(t, "ops")}, func(c *alert.Config) {
		c.Interval = 50 * time.Millisecond
		c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
		c.DiskFree = func() (uint64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	mu.Lock()
	ready = errors.New("ping: database is locked")
	mu.Unlock()
	if _, ok := waitFor(10*time.Second, func() bool { return slowGot.Load() > 0 }); !ok {
		t.Fatal("the pager channel was never sent to")
	}
	// The pager's receiver now hangs. The disk fills up.
	mu.Lock()
	free = 1 << 20
	mu.Unlock()
	took, ok := waitFor(15*time.Second, func() bool { return len(fast.payloads()) > 0 })
	if !ok {
		t.Fatal("ops was never told of the disk alert")
	}
	if took > 2*time.Second {
		t.Errorf("ops was told of the disk alert %v after the disk filled up, evaluations running every 50ms: "+
			"the hanging pager channel (timeout 6s) held up evaluation and every other channel", took.Round(100*time.Millisecond))
	}
}

// TestAlerts_DirectSendNotBehindHangingChannel: while the database cannot store an
// alert, database_not_ready tells its channels straight away, each with three tries:
// a first channel that hangs does not delay the second.
func TestAlerts_DirectSendNotBehindHangingChannel(t *testing.T) {
	f := newFixture(t)
	slowSrv, slowGot := hangingHook(t)
	fast := newHook(t, 0)
	var down atomic.Bool
	down.Store(true)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"pager", "ops"}}},
		[]*alert.Channel{hangingChannel(t, "pager", slowSrv.URL, 2*time.Second), fast.channel(t, "ops")}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = func(context.Context) error { return errors.New("disk I/O error") }
		})
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Evaluate(context.Background()); e.WaitDirect() }()
	defer func() { <-done }()
	took, ok := waitFor(20*time.Second, func() bool { return len(fast.payloads()) > 0 })
	if !ok {
		t.Fatal("ops was never told")
	}
	if slowGot.Load() == 0 {
		t.Fatal("the pager channel was never tried")
	}
	if took > 1500*time.Millisecond {
		t.Errorf("ops was told %v after the database failed, behind the hanging pager channel (timeout 2s): "+
			"not straight away", took.Round(100*time.Millisecond))
	}
}

// TestAlerts_DirectSendHoldsUpNoRule: the database reads but cannot store the
// database_not_ready alert (a trigger refuses the row, as a full disk refuses a
// write), so that rule tells its channel straight away, and that channel's receiver
// hangs. The direct send, three tries of the channel's timeout, is made apart from
// the evaluation: the rules after it, disk_space here (the very rule a full disk
// should fire), are evaluated, and their alerts told, as if it were not there.
func TestAlerts_DirectSendHoldsUpNoRule(t *testing.T) {
	f := newFixture(t)
	execSQL(t, f.db, `CREATE TRIGGER refuse_db_alert BEFORE INSERT ON alerts WHEN NEW.kind = 'database_not_ready'
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`)
	slowSrv, slowGot := hangingHook(t)
	fast := newHook(t, 0)
	const timeout = 2 * time.Second
	e := f.engine(t, []alert.Rule{
		{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"pager"}},
		{Name: "disk", Kind: alert.KindDiskSpace, MinFree: 1 << 30, Channels: []string{"ops"}},
	}, []*alert.Channel{hangingChannel(t, "pager", slowSrv.URL, timeout), fast.channel(t, "ops")}, func(c *alert.Config) {
		c.Interval = 50 * time.Millisecond
		c.Ready = func(context.Context) error { return errors.New("database or disk is full") }
		c.DiskFree = func() (uint64, error) { return 1 << 20, nil }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	took, ok := waitFor(20*time.Second, func() bool { return len(fast.payloads()) > 0 })
	if !ok {
		t.Fatal("ops was never told of the disk alert")
	}
	if _, ok := waitFor(5*time.Second, func() bool { return slowGot.Load() > 0 }); !ok {
		t.Fatal("the pager channel was never tried")
	}
	if took > time.Second {
		t.Errorf("ops was told of the disk alert %v after start, evaluations every 50ms: the database_not_ready rule's "+
			"direct send to the hanging pager channel (timeout %v) held up the evaluation of the rules after it",
			took.Round(100*time.Millisecond), timeout)
	}
	if p := fast.payloads()[0]; p.Type != "alert.opened" || p.Data.Rule != "disk" {
		t.Errorf("ops was told %s of %s; want the disk alert's opening", p.Type, p.Data.Rule)
	}
}
