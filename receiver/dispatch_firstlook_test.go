package receiver_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_RecordOnlyQueuedBeforeFirstLook: a replica that has "ota" without a
// forward_url, while another replica's dispatcher is seen forwarding it, must queue
// ota's deliveries for that one. A delivery that comes before this replica's dispatcher
// has first looked who forwards what (its look slowed here by the write lock held by
// another process, as at a replica's start during a rolling change of the sources) is
// queued too, not settled unsent for good.
func TestDispatch_RecordOnlyQueuedBeforeFirstLook(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	// The forwarding replica, seen just now.
	if err := db.DispatcherSeen(ctx, "forwarder", []string{"ota"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// This replica: ota record-only here, and another source ("cm") it forwards, so its
	// look-around writes DispatcherSeen before it reads who forwards ota.
	ds := newDownstream(t, 0, nil)
	cm := forwardSource(t, ds.srv.URL, 3)
	cm.Name = "cm"
	sources := []receiver.Source{otaSource(t), cm}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: sources, Poll: 10 * time.Millisecond,
		RecordOnlyAfter: time.Hour, ForwarderGone: 30 * time.Second})
	rc := receiver.New(receiver.Config{Sources: sources, Store: db, MaxBody: 4096, ForwardedElsewhere: d.ForwardedElsewhere})
	e := &testEnv{db: db, srv: serveReceiver(t, rc, nil), src: sources[0]}

	// Another process holds the write lock for a moment.
	release := holdWriteLock(t, path, "BEGIN IMMEDIATE")
	// As serve would be without its Look first: Run under way, intake serving.
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(dctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // Run is well under way: its look-around waits for the lock
	go func() {
		time.Sleep(time.Second)
		release()
	}()
	if code, a, _ := e.post(t, "ota", "msg_startup", cancellation, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("delivery: %d %+v", code, a)
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !d.ForwardedElsewhere("ota") {
			return lookPending("the replica has not looked around yet")
		}
		return nil
	})
	c, err := db.Claim(ctx, "ota", "msg_startup")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != storage.StateProcessing {
		t.Fatalf("claim of a delivery accepted while another replica forwards ota is %s (attempts %d): "+
			"settled unsent, it never reaches the downstream; want it queued (processing) for the forwarding replica",
			c.State, c.Attempts)
	}
}

type lookPending string

func (e lookPending) Error() string { return string(e) }
