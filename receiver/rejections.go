package receiver

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// Unauthenticated rejections (an unknown source, a bad signature, a body over the limit
// or one that never arrived) cost whoever sends them nothing, so they are not stored one
// row each: a flood of them would fill the disk and then refuse real deliveries. A sample
// is stored as deliveries, for the console and for finding a misconfigured provider; every
// other one is counted per minute, source and status, and the counts are written every
// few seconds. Each is still in the metrics and, as a count, on the dashboard and the
// events list.

// RejectionLimits bounds the unauthenticated rejections stored individually. Zero fields
// take the defaults.
type RejectionLimits struct {
	// PerAddress is how many a minute are stored from one client address (an IPv6
	// address's /64, which one host commonly holds whole); default 5.
	PerAddress int
	// Total is how many a minute are stored in all; default 20.
	Total int
}

// Defaults of RejectionLimits, and the bounds on what a stored sample keeps.
const (
	DefaultRejectionsPerAddress = 5
	DefaultRejectionsTotal      = 20

	// maxSampleHeaders bounds the headers kept of a stored sample, in bytes as stored
	// (JSON); each value is cut at maxSampleHeaderValue. A provider's own headers (its
	// signature, its ids, its user agent) fit; a sender's padding does not. With every
	// other field at its bound (a 64-byte name, quoted in the error at up to four bytes
	// a byte, the longest address, maxSampleContentType), a sample's row stays under
	// 2,040 bytes, so two share a 4 KiB page: twenty a minute take ten pages, not twenty.
	maxSampleHeaders     = 1536
	maxSampleHeaderValue = 512
	// maxSampleContentType bounds the Content-Type kept of a stored sample: a real one
	// fits ("application/x-www-form-urlencoded; charset=UTF-8" is 48), and it is in the
	// sample's headers too.
	maxSampleContentType = 48
	// maxSampleReason bounds the error kept of a stored sample, and answered and logged
	// with it: room for the longest reason hookdedup writes of its own (an unknown
	// 64-byte name quoted at up to four bytes a byte), not for a body's member name
	// quoted whole in a parse error.
	maxSampleReason = 320
	// maxReason bounds the error of a rejection whose body is kept (its sender passed
	// the source's check): long enough for any reason that names fields and pointers.
	maxReason = 2048

	// maxNamedUnknown is how many unknown source names a minute are counted by name;
	// further names are counted together under "". The sampled deliveries still show
	// which names were asked for.
	maxNamedUnknown = 8
	// maxPendingCounts bounds the counts held in memory while the database cannot take
	// them; past it they are dropped, and logged (the metrics keep them).
	maxPendingCounts = 4096
	// countsFlushDelay is how long counts wait in memory before they are written: at
	// most this much of them is lost if the process is killed.
	countsFlushDelay = 5 * time.Second
	// maxFlushRetries bounds the scheduled retries of a flush that failed.
	maxFlushRetries = 12
)

// RejectionCounter stores counts of rejections not stored individually. A Store that
// implements it (as each storage engine does) gets the counts; without it they reach only the
// metrics and the log.
type RejectionCounter interface {
	AddRejectionCounts(ctx context.Context, counts []storage.RejectionCount) error
}

type countKey struct {
	minute int64 // unix minutes
	source string
	status int
}

// rejections decides which unauthenticated rejections are stored, and holds the counts
// of the others until they are written.
type rejections struct {
	limits RejectionLimits
	store  RejectionCounter // nil: counts go to the log only
	log    *slog.Logger

	mu       sync.Mutex
	minute   int64           // the minute that byAddr, total and named are of
	byAddr   map[string]int  // samples stored this minute per client address
	total    int             // samples stored this minute
	named    map[string]bool // unknown names counted by name this minute
	pending  map[countKey]int64
	timer    *time.Timer // a flush is scheduled
	failures int         // flushes failed in a row
	// fails logs the flushes that fail: while the database cannot store, each flush
	// does, every countsFlushDelay while rejections keep coming. dropped counts the
	// rejections dropped since the last line that told of them.
	fails   *outage.Log
	dropped int64
}

func newRejections(limits RejectionLimits, store RejectionCounter, log *slog.Logger) *rejections {
	if limits.PerAddress <= 0 {
		limits.PerAddress = DefaultRejectionsPerAddress
	}
	if limits.Total <= 0 {
		limits.Total = DefaultRejectionsTotal
	}
	return &rejections{
		limits: limits, store: store, log: log,
		byAddr: map[string]int{}, named: map[string]bool{}, pending: map[countKey]int64{},
		fails: outage.New(log, slog.LevelWarn, "rejection counts not stored; kept for the next try", "rejection counts stored again"),
	}
}

// turn starts a new minute's bounds when now is past the current one. Callers hold mu.
func (rj *rejections) turn(now time.Time) int64 {
	m := now.UnixMilli() / 60000
	if m != rj.minute {
		rj.minute, rj.total = m, 0
		clear(rj.byAddr)
		clear(rj.named)
	}
	return m
}

// sample reports whether an unauthenticated rejection from remoteAddr is to be stored,
// and takes its place in this minute's bounds if so. The map of addresses holds only
// addresses that got a sample, so it never exceeds Total entries. The address is parsed
// only while the minute has room: in a flood, past Total, a rejection costs one lock.
func (rj *rejections) sample(remoteAddr string, now time.Time) bool {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	rj.turn(now)
	if rj.total >= rj.limits.Total {
		return false
	}
	addr := clientAddr(remoteAddr)
	if rj.byAddr[addr] >= rj.limits.PerAddress {
		return false
	}
	rj.total++
	rj.byAddr[addr]++
	return true
}

// count adds one rejection not stored individually. known says that source is a
// configured source's name; an unknown name is counted by name only for the first
// maxNamedUnknown names of a minute.
func (rj *rejections) count(source string, known bool, status int, now time.Time) {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	m := rj.turn(now)
	if !known && !rj.named[source] {
		if len(rj.named) < maxNamedUnknown {
			rj.named[source] = true
		} else {
			source = ""
		}
	}
	rj.pending[countKey{m, source, status}]++
	rj.schedule()
}

// schedule sees to it that the pending counts are written within countsFlushDelay.
// Callers hold mu.
func (rj *rejections) schedule() {
	if rj.timer != nil {
		return
	}
	rj.timer = time.AfterFunc(countsFlushDelay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rj.flush(ctx) // an error is logged, and the counts kept for the next try
	})
}

// flush writes the pending counts. If the database refuses them, they are kept for the
// next flush (up to maxPendingCounts) and the error is returned.
func (rj *rejections) flush(ctx context.Context) error {
	rj.mu.Lock()
	pending := rj.pending
	rj.pending = map[countKey]int64{}
	if rj.timer != nil {
		rj.timer.Stop()
		rj.timer = nil
	}
	rj.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	var n int64
	counts := make([]storage.RejectionCount, 0, len(pending))
	for k, c := range pending {
		n += c
		counts = append(counts, storage.RejectionCount{
			Source: k.source, Status: k.status, Minute: time.UnixMilli(k.minute * 60000), Rejections: c})
	}
	var err error
	if rj.store != nil {
		err = rj.store.AddRejectionCounts(ctx, counts)
	}
	rj.mu.Lock()
	defer rj.mu.Unlock()
	if err == nil {
		rj.failures = 0
		rj.fails.Note(time.Now(), nil)
		// One line per flush, not one per rejection: the log is on a disk too.
		attrs := []any{logRejections, n}
		if rj.dropped > 0 { // dropped during failures whose lines did not tell of them
			attrs, rj.dropped = append(attrs, logDropped, rj.dropped), 0
		}
		rj.log.Warn("unauthenticated rejections counted, not stored individually", attrs...)
		return nil
	}
	var dropped int64
	for k, c := range pending {
		if _, ok := rj.pending[k]; !ok && len(rj.pending) >= maxPendingCounts {
			dropped += c
			continue
		}
		rj.pending[k] += c
	}
	// Retried for a minute or so; after that the next rejection, or FlushRejections,
	// tries again (a closed database must not keep a timer going).
	if rj.failures++; rj.failures < maxFlushRetries {
		rj.schedule()
	}
	rj.dropped += dropped
	if rj.fails.Note(time.Now(), err, logRejections, n, logDropped, rj.dropped) {
		rj.dropped = 0
	}
	return err
}

// clientAddr is the address that the per-address bound applies to: the IP of
// remoteAddr without its port, an IPv6 address as its /64.
func clientAddr(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}
