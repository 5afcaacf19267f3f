package receiver

import (
	"sync"
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
}

// seen counts a failure, whether or not it gets a log line.
func (f *storeFailures) seen() {
	f.mu.Lock()
	f.total++
	f.mu.Unlock()
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
