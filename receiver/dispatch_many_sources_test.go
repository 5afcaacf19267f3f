package receiver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_SixHundredSources: a configuration of more forwarding sources than
// SQLite joins in one compound statement (500), each owed a worker, with an event of
// each due at once: every event goes downstream, through the leases of one job a source.
func TestDispatch_SixHundredSources(t *testing.T) {
	db := storagetest.Open(t)
	ds := newCountingDownstream(t)
	var sources []receiver.Source
	for i := range 600 {
		src := forwardSource(t, ds.srv.URL, 3)
		// Leases are what is tested, not timeouts: on a loaded machine (the race
		// detector, the other packages' tests) three hand-offs of 300 ms each could
		// all run out, and the key fail with its event never sent.
		src.Name, src.AttemptTimeout = fmt.Sprintf("s%03d", i), 10*time.Second
		sources = append(sources, src)
	}
	for _, s := range sources {
		queue(t, db, s.Name, "evt")
	}
	d := runSharedDispatcher(t, db, 0, nil, sources...)
	storagetest.Eventually(t, 60*time.Second, func() error {
		d.Wake()
		if n := ds.count(); n < 600 {
			return fmt.Errorf("%d of 600 events went downstream", n)
		}
		return nil
	})
}
