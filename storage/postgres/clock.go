package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clock is this machine's time set by the database server's. Replicas on several
// machines compare the times one another stored: a claim's expiry, a dispatch lease, a
// session's last use. A machine whose clock ran a minute ahead took over leases a
// minute early and sent an event downstream while another replica's attempt was still
// out, and took expired keys as free while the others held them. Every replica that
// reads the server's clock keeps one time, however far the machines' clocks are apart.
type clock struct {
	machine func() time.Time
	offset  atomic.Int64 // nanoseconds added to machine's time
	stop    chan struct{}
	done    chan struct{}
}

const (
	// clockEvery is how often the offset is measured again: a machine's clock drifts
	// slowly, or is set at once (an NTP step), and a minute of either is tolerable.
	clockEvery = time.Minute
	// clockSlack is how far a measurement may be from the offset in use before it
	// replaces it. A machine kept in time by NTP measures a few milliseconds either
	// way, from the round trip; its clock is then used as it is, without jitter.
	clockSlack = 100 * time.Millisecond
)

func (c *clock) now() time.Time {
	return c.machine().Add(time.Duration(c.offset.Load()))
}

// measure reads the server's clock and returns how far it is from the machine's, from
// the quickest of a few round trips (its error is at most half the round trip), or
// false when every round trip took longer than clockSlack.
func (c *clock) measure(ctx context.Context, pool *pgxpool.Pool) (time.Duration, bool, error) {
	var best, offset time.Duration
	for range 3 {
		before := c.machine()
		var server time.Time
		if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server); err != nil {
			return 0, false, err
		}
		rtt := c.machine().Sub(before)
		if rtt <= clockSlack && (best == 0 || rtt < best) {
			best, offset = max(rtt, 1), server.Sub(before.Add(rtt/2))
		}
	}
	return offset, best != 0, nil
}

// setClock measures the offset and uses it if it differs by more than clockSlack from the one
// in use, logging a machine clock off by a second or more.
func (db *DB) setClock(ctx context.Context) {
	offset, ok, err := db.clock.measure(ctx, db.pool)
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			db.log.Warn("could not read the database server's clock; times are this machine's, set by the last reading", "err", err)
		}
		return
	}
	if d := offset - time.Duration(db.clock.offset.Load()); d > -clockSlack && d < clockSlack {
		return
	}
	if offset > -clockSlack && offset < clockSlack {
		offset = 0
	}
	db.clock.offset.Store(int64(offset))
	switch {
	case offset >= time.Second:
		db.log.Warn("this machine's clock is behind the database server's: hookdedup keeps the server's time for what it stores",
			"behind", offset.Round(time.Millisecond))
	case offset <= -time.Second:
		db.log.Warn("this machine's clock is ahead of the database server's: hookdedup keeps the server's time for what it stores",
			"ahead", (-offset).Round(time.Millisecond))
	default:
		db.log.Info("keeping the database server's time", "offset", offset.Round(time.Millisecond))
	}
}

// keepClock measures the offset every clockEvery until Close.
func (db *DB) keepClock() {
	defer close(db.clock.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-db.clock.stop
		cancel()
	}()
	t := time.NewTicker(clockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			db.setClock(ctx)
		}
	}
}
