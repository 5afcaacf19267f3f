package postgres

import (
	"context"
	"fmt"
	"time"
)

// noneSince is firstReceivedSince's answer when no delivery was received since.
const noneSince = 1 << 62

// aheadSlack is how far after now a receipt time may lie and still count as one
// (firstReceivedSince): deliveries stored while a search runs, a clock stepped by a
// little. A stretch stamped less far ahead holds the retention sweep back that long
// at most.
const aheadSlack = time.Hour

// sqlFirstReceivedSince is the binary search of firstReceivedSince in one statement
// (so one snapshot, and one round trip however many steps): search holds the range
// [lo, hi] of ids still in question, each step probing the first delivery from its
// middle on through the primary key. $1 is the time sought, $2 the latest receipt time
// that counts (now and aheadSlack), $3 noneSince.
const sqlFirstReceivedSince = `
WITH RECURSIVE search (lo, hi) AS (
	SELECT min(id), max(id) FROM deliveries
	UNION ALL
	SELECT CASE WHEN p.received_at BETWEEN $1 AND $2 THEN s.lo ELSE coalesce(p.id + 1, s.hi + 1) END,
		CASE WHEN p.received_at BETWEEN $1 AND $2 THEN s.lo + (s.hi - s.lo) / 2 ELSE s.hi END
	FROM search AS s
	LEFT JOIN LATERAL (SELECT id, received_at FROM deliveries WHERE id >= s.lo + (s.hi - s.lo) / 2
		ORDER BY id LIMIT 1) AS p ON true
	WHERE s.lo < s.hi)
SELECT coalesce((
	SELECT f.id FROM search AS s
	CROSS JOIN LATERAL (SELECT id, received_at FROM deliveries WHERE id >= s.lo ORDER BY id LIMIT 1) AS f
	WHERE s.lo >= s.hi AND f.received_at BETWEEN $1 AND $2), $3)`

// firstReceivedSince returns the id of the first delivery received at or after t, or
// noneSince. Receipt times grow with ids, so it is a binary search over the table's
// ids, each step one look-up by id: some 25 steps with millions of deliveries.
//
// This is the SQLite engine's search, not an index of receipt times: such an index
// would cost intake one more B-tree write per delivery, the hottest write there is,
// and would still have to be combined with the index that orders each page by id. An
// id range combines with every index that orders a page of the events list (each
// ends with the id).
// With several replicas, receipt times grow with ids only as closely as the replicas'
// clocks agree and as soon as a delivery's transaction takes its ids after its stamp
// (at once, or on a retry after a deadlock): a time bound may be off by about that much.
//
// A delivery stamped more than aheadSlack after now was stamped by a clock that ran
// ahead and was set right since: the ids after it were received before its stamp. The
// search steps over it as if received before t; otherwise a stretch of such stamps
// would end every search for a time before them there.
func (db *DB) firstReceivedSince(ctx context.Context, t, now time.Time) (int64, error) {
	var id int64
	err := db.pool.QueryRow(ctx, sqlFirstReceivedSince, millis(t), millis(now.Add(aheadSlack)), int64(noneSince)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("first delivery since %s: %w", t.Format(time.RFC3339), err)
	}
	return id, nil
}
