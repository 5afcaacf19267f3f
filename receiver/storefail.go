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
	// saying that stores succeed again: a store then looks whether to say so.
	failing atomic.Bool
	// quietUntil is next, in unix nanoseconds, for stored to read without the lock.
	quietUntil atomic.Int64
}

// seen counts a failure, whether or not it gets a log line.
func (f *storeFailures) seen() {
	f.mu.Lock()
	f.total++
	f.failing.Store(true)
	f.mu.Unlock()
}

// stored reports, of a store at now that succeeded, whether it gets a line saying that
// stores succeed again, and if so how many failures since the previous line got none:
// the first after failures does, unless a line came less than storeFailureEvery
// before it; then the first after that. Without it, the failures after the last line
// would never be told, nor when the database took writes again. Lines of failures and
// of recoveries share the bound, so a database that fails every other write writes no
// more lines than one that fails them all.
func (f *storeFailures) stored(now time.Time) (log bool, unlogged int) {
	if !f.failing.Load() || now.UnixNano() < f.quietUntil.Load() {
		return false, 0 // the hot path: atomic reads, no lock
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing.Load() || now.Before(f.next) {
		return false, 0
	}
	f.failing.Store(false)
	unlogged, f.unlogged = f.unlogged, 0
	f.next = now.Add(storeFailureEvery)
	f.quietUntil.Store(f.next.UnixNano())
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
	f.quietUntil.Store(f.next.UnixNano())
	return true, unlogged
}

// count is the number of failures since the start.
func (f *storeFailures) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}
