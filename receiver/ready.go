package receiver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// readyReuse is how long a ready answer of a readiness check serves the probes that
// come after it. A check commits a write on the database (readiness is that the database
// takes writes), and on SQLite that write queues for the one write connection intake
// uses. /readyz answers anyone: a flood of probes, each a transaction and a flush of its
// own, queued ahead of deliveries, and under 1,500 concurrent probes 6 % of them timed
// out. One check at a time, a ready answer reused for a second, bounds what probes cost
// the database at about one small commit a second, however many come. A not-ready
// answer is not reused: the probe after it looks again, so a database that recovers is
// seen ready at once (and a failing check writes nothing).
const readyReuse = time.Second

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// readiness is the last readiness check's answer and the check under way, if any.
type readiness struct {
	mu      sync.Mutex
	running chan struct{} // closed when the check under way ends; nil when none is
	err     error         // the last check's answer
	ended   time.Time     // when it ended; zero before the first
	fails   uint64        // store failures counted when it began
}

// checkReady is the answer to a readiness probe: that of the check under way when the
// probe came, or a ready answer of one that ended less than readyReuse before it, or of
// a check of its own. A ready answer is not reused once a delivery has failed to be
// stored since its check began: intake saw the database fail, so the probe looks again.
func (rc *Receiver) checkReady(ctx context.Context) error {
	r := &rc.ready
	for {
		r.mu.Lock()
		if r.running != nil {
			running := r.running
			r.mu.Unlock()
			select {
			case <-running:
				continue // that check's answer is fresh now
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		fails := rc.storeFails.count()
		if !r.ended.IsZero() && r.err == nil && time.Since(r.ended) < readyReuse && r.fails == fails {
			r.mu.Unlock()
			return nil
		}
		running := make(chan struct{})
		r.running = running
		r.mu.Unlock()

		// Not the probe's own context: the probes waiting on this check would get the
		// answer of one that gave up.
		check, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := rc.store.Ping(check)
		cancel()
		// Probes are unauthenticated and a not-ready answer is not reused: logged at
		// most every storeFailureEvery, as a failure to store is.
		if err != nil && !errors.Is(err, storage.ErrFileGone) {
			if log, unlogged := rc.storeFails.take(rc.now()); log {
				rc.log.Warn("not ready", logErr, err, logUnlogged, unlogged)
			}
		}

		r.mu.Lock()
		r.err, r.ended, r.fails, r.running = err, time.Now(), fails, nil
		close(running)
		r.mu.Unlock()
		return err
	}
}

func (rc *Receiver) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	switch err := rc.checkReady(ctx); {
	case err == nil:
		writeJSON(w, http.StatusOK, answer{Status: "ready"})
	case errors.Is(err, storage.ErrFileGone):
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "the database file is no longer at its path: restart needed"})
	default:
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "database is not writable"})
	}
}
