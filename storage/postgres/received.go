package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// noneSince is firstReceivedSince's answer when no delivery was received since.
const noneSince = 1 << 62

// aheadSlack is how far after now a receipt time may lie and still count as one
// (firstReceivedSince): deliveries stored while a search runs, a clock stepped by a
// little. A stretch stamped less far ahead holds the retention sweep back that long
// at most.
const aheadSlack = time.Hour

// sqlIDRange is the lowest and highest delivery id (0, 0 without deliveries), each
// one seek at an end of the primary key.
const sqlIDRange = `SELECT coalesce((SELECT min(id) FROM deliveries), 0), coalesce((SELECT max(id) FROM deliveries), 0)`

// sqlFirstFrom is the first delivery with an id from $1 on, and when it was received.
const sqlFirstFrom = `SELECT id, received_at FROM deliveries WHERE id >= $1 ORDER BY id LIMIT 1`

// firstReceivedSince returns the id of the first delivery received at or after t, or
// noneSince. Receipt times grow with ids, nearly, so it is a binary search over the
// table's ids, each step one look-up by id: some 25 steps with millions of deliveries,
// where an index of receipt times would cost intake one more B-tree write per
// delivery.
//
// A delivery stamped more than aheadSlack after now was stamped by a clock that ran
// ahead and was set right since: the ids after it were received before its stamp. The
// search steps over it as if received before t; otherwise a stretch of such stamps
// would end every search for a time before them there, and the retention sweep would
// keep every delivery after them until the real time caught up with the wrong stamps
// (once it has, they hold the sweep back until they are past retention themselves:
// retention late, never early, as the sweep checks each receipt time).
func (db *DB) firstReceivedSince(ctx context.Context, t, now time.Time) (int64, error) {
	at, ahead := millis(t), millis(now.Add(aheadSlack))
	// The first delivery with an id from id on, and when it was received (none: never).
	probe := func(id int64) (int64, int64, error) {
		var next, received int64
		err := db.pool.QueryRow(ctx, sqlFirstFrom, id).Scan(&next, &received)
		if errors.Is(err, pgx.ErrNoRows) {
			return noneSince, 1<<63 - 1, nil
		}
		return next, received, err
	}
	var lo, hi int64
	if err := db.pool.QueryRow(ctx, sqlIDRange).Scan(&lo, &hi); err != nil {
		return 0, err
	}
	if hi == 0 {
		return noneSince, nil
	}
	// The answer is the first delivery from some x in [lo, hi] on: the smallest x whose
	// first delivery was received at or after t. Below lo, all were received before.
	for lo < hi {
		mid := lo + (hi-lo)/2
		id, received, err := probe(mid)
		if err != nil {
			return 0, err
		}
		if received >= at && received <= ahead {
			hi = mid
		} else {
			lo = id + 1 // no delivery between mid and id
		}
	}
	id, received, err := probe(lo)
	if err != nil || received < at || received > ahead {
		return noneSince, err
	}
	return id, nil
}
