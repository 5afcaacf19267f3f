package receiver

import (
	"sync"
	"sync/atomic"
	"time"
)

// storeFailureEvery is how often, at most, the receiver logs a delivery or a batch that
// could not be stored. When the database fails (a full disk, an I/O error) every
// delivery fails alike: with a line each, a full disk under load wrote 9,000 lines a
// second, into logs that often share that disk. The metrics count every one.
const storeFailureEvery = 10 * time.Second

// storeFailures decides which store failures get a log line.
type storeFailures struct {
	mu       sync.Mutex
	next     time.Time // when the next failure may be logged
	unlogged int       // failures since the last line that got none
	total    uint64    // failures since the start, logged or not (readiness reads it)
	// failing says that a failure came after the last store, or after the last line
	// saying that stores succeed again: a store then looks whether to say so. Read
	// without the lock, it keeps a store's usual path to one atomic load.
	failing atomic.Bool
}

// seen counts a failure, whether or not it gets a log line.
func (f *storeFailures) seen() {
	f.mu.Lock()
	f.total++
	f.failing.Store(true)
	f.mu.Unlock()
}

// stored reports, of a store at now (read only while failures are unsaid) that
// succeeded, whether it gets a line saying that stores succeed again, and if so how many
// failures since the previous line got none: the first after failures does, unless a
// line came less than storeFailureEvery before it; then the first after that. Without
// it, the failures after the last line would never be told, nor when the database took
// writes again. Lines of failures and of recoveries share the bound, so a database that
// fails every other write writes no more lines than one that fails them all.
func (f *storeFailures) stored(now func() time.Time) (log bool, unlogged int) {
	if !f.failing.Load() {
		return false, 0 // the hot path: one atomic load, no lock, no clock
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := now()
	if !f.failing.Load() || t.Before(f.next) {
		return false, 0
	}
	f.failing.Store(false)
	unlogged, f.unlogged = f.unlogged, 0
	f.next = t.Add(storeFailureEvery)
	return true, unlogged
}

// take reports whether a failure at now gets a log line, and if so how many failures
// since the previous line got none.
func (f *storeFailures) take(now time.Time) (log bool, unlogged int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Before(f.next) {
		f.unlogged++
		return false, 0
	}
	unlogged, f.unlogged = f.unlogged, 0
	f.next = now.Add(storeFailureEvery)
	return true, unlogged
}

// count is the number of failures since the start.
func (f *storeFailures) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// noteStored logs, after failures, that a delivery or batch was stored again
// (storeFailures.stored).
func (rc *Receiver) noteStored() {
	if log, unlogged := rc.storeFails.stored(rc.now); log {
		rc.log.Info("deliveries stored again", logUnlogged, unlogged)
	}
}
