package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookdedup/hookdedup/storage/outage"
)

// clock is the database server's time, as read by this machine. Replicas on several
// machines compare the times one another stored: a claim's expiry, a dispatch lease, a
// session's last use. A machine whose clock ran a minute ahead took over leases a
// minute early and sent an event downstream while another replica's attempt was still
// out, and took keys others held for expired. Every replica that reads the server's
// clock keeps one time, however far the machines' clocks are apart.
//
// Between two readings the time runs on by the time since the machine started
// (sinceBoot), which a step of its wall clock (NTP setting right a clock that was
// minutes off at boot) does not move, and which counts a suspend: a replica that took
// the wall clock for the server's plus an offset would run minutes ahead until the
// next reading.
type clock struct {
	machine func() time.Time     // the machine's wall clock: before the first reading, and in what is logged
	at      atomic.Pointer[mark] // the reading in use; nil before the first
	stop    chan struct{}
	done    chan struct{}
	// fails logs the readings that fail: while the server cannot be reached each one
	// does, every clockEvery for as long as that lasts. Open's reading, then
	// keepClock's, one at a time.
	fails *outage.Log
}

// mark is one reading: the server's time when the machine had been up for at.
type mark struct {
	server time.Time
	at     time.Duration // sinceBoot
}

// clockEvery is how often the server's clock is read again: the machine's monotonic
// clock drifts slowly, and a minute of drift is far under clockSlack. Tests lower it.
var clockEvery = time.Minute

const (
	// clockSlack is how far a reading may be from the time in use before it replaces
	// it: readings vary by a few milliseconds with the round trip, and taking each
	// would move the time back and forth.
	clockSlack = 100 * time.Millisecond
	// clockFar is how far off a machine's clock, or how uncertain a reading, is logged.
	clockFar = time.Second
)

func (c *clock) now() time.Time {
	m := c.at.Load()
	if m == nil {
		return c.machine()
	}
	return m.server.Add(sinceBoot() - m.at)
}

// read reads the server's clock, from the quickest of a few round trips: its error is at
// most half that round trip, which it returns.
func (c *clock) read(ctx context.Context, pool *pgxpool.Pool) (mark, time.Duration, error) {
	var best mark
	bestRTT := time.Duration(-1)
	for range 3 {
		before := sinceBoot()
		var server time.Time
		if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server); err != nil {
			return mark{}, 0, err
		}
		rtt := sinceBoot() - before
		if bestRTT < 0 || rtt < bestRTT {
			best, bestRTT = mark{server: server, at: before + rtt/2}, rtt
		}
	}
	return best, bestRTT / 2, nil
}

// replaces says whether the reading next, known to within uncertain, replaces the one
// in use, cur (nil before the first): when they disagree by more than the slack and the
// reading's own uncertainty, or there is none yet.
func replaces(cur *mark, next mark, uncertain time.Duration) bool {
	if cur == nil {
		return true
	}
	d := next.server.Sub(cur.server.Add(next.at - cur.at))
	return d > clockSlack+uncertain || d < -(clockSlack+uncertain)
}

// setClock reads the server's clock and takes the reading into use if it replaces the
// one in use, logging a machine clock a second or more off the server's, and a server
// so far away that its time is known only to a second or worse.
func (db *DB) setClock(ctx context.Context) {
	m, uncertain, err := db.clock.read(ctx, db.pool)
	if ctx.Err() == nil {
		db.clock.fails.Note(time.Now(), err)
	}
	if err != nil {
		return
	}
	if !replaces(db.clock.at.Load(), m, uncertain) {
		return
	}
	db.clock.at.Store(&m)
	if uncertain >= clockFar {
		db.log.Warn("the database server answers so slowly that its time is known only roughly", "within", uncertain.Round(time.Millisecond))
	}
	off := db.clock.machine().Sub(db.clock.now())
	switch {
	case off >= clockFar:
		db.log.Warn("this machine's clock is ahead of the database server's: hookdedup keeps the server's time for what it stores",
			"ahead", off.Round(time.Millisecond))
	case off <= -clockFar:
		db.log.Warn("this machine's clock is behind the database server's: hookdedup keeps the server's time for what it stores",
			"behind", (-off).Round(time.Millisecond))
	}
}

// keepClock reads the server's clock every clockEvery until Close; every second until
// a first reading has succeeded, since until then the replica keeps its machine's time.
func (db *DB) keepClock() {
	defer close(db.clock.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-db.clock.stop
		cancel()
	}()
	for {
		wait := clockEvery
		if db.clock.at.Load() == nil {
			wait = min(wait, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
			db.setClock(ctx)
		}
	}
}
