package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

const minuteMillis = 60000

// AddRejectionCounts adds counts to the rejections counted without a delivery row, and
// to the dashboard's hourly totals of rejected deliveries (DeliveryStats), in one
// transaction: the dashboard then shows every rejection, stored or only counted. The
// totals count unknown names (StatusUnknownSource) together, under UnknownSources.
//
// Each row is an upsert that adds to what is there (ON CONFLICT … DO UPDATE), so that
// replicas adding to one minute at once all count. The rows are written in the order
// of their keys, the counts' first and then the totals', so that two replicas adding
// to the same rows lock them in the same order and never deadlock each other. An
// unknown name asked for in a URL may hold a NUL byte, which PostgreSQL's text cannot:
// it is counted under the name with U+FFFD in its place (textForPG).
func (db *DB) AddRejectionCounts(ctx context.Context, counts []storage.RejectionCount) error {
	type row struct {
		minute     int64
		source     string
		status     int
		rejections int64
	}
	var rows []row
	for _, c := range counts {
		if c.Rejections > 0 {
			rows = append(rows, row{millis(c.Minute) / minuteMillis, textSafe(c.Source), c.Status, c.Rejections})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(x, y row) int {
		return cmp.Or(cmp.Compare(x.minute, y.minute), cmp.Compare(x.source, y.source), cmp.Compare(x.status, y.status))
	})
	totals := slices.Clone(rows)
	for i, r := range totals {
		if r.status == storage.StatusUnknownSource {
			totals[i].source = storage.UnknownSources
		}
	}
	slices.SortFunc(totals, func(x, y row) int {
		return cmp.Or(cmp.Compare(x.source, y.source), cmp.Compare(x.minute, y.minute))
	})
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, r := range rows {
			b.Queue(`INSERT INTO rejection_counts (minute, source, status, rejections) VALUES ($1, $2, $3, $4)
				ON CONFLICT (minute, source, status) DO UPDATE SET rejections = rejection_counts.rejections + excluded.rejections`,
				r.minute, r.source, r.status, r.rejections)
		}
		for _, r := range totals {
			b.Queue(`INSERT INTO delivery_stats (source, hour, outcome, deliveries) VALUES ($1, $2, 'rejected', $3)
				ON CONFLICT (source, hour, outcome, currency) DO UPDATE SET deliveries = delivery_stats.deliveries + excluded.deliveries`,
				r.source, r.minute*minuteMillis/3600000, r.rejections)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("add rejection counts: %w", err)
	}
	return nil
}

// RejectionsNotStored returns how many rejections that f would list were counted
// without being stored individually. Such a rejection has a source, a status and a
// minute, nothing else: a filter on any other field (an outcome other than rejected, a
// key, a booking, a property, an event status, mismatches, an amount) matches none of
// them. From and To select whole minutes: a minute counts when it starts at or after
// From's minute and before To. The cursor (Before) is ignored: the count belongs to
// the filter, not to a page.
func (db *DB) RejectionsNotStored(ctx context.Context, f storage.DeliveryFilter) (int64, error) {
	if !f.SelectsRejections() {
		return 0, nil
	}
	lo, hi := int64(0), int64(1<<62)
	if !f.From.IsZero() {
		lo = millis(f.From) / minuteMillis
	}
	if !f.To.IsZero() {
		// The minutes that start before To.
		hi = (millis(f.To) + minuteMillis - 1) / minuteMillis
	}
	query := `SELECT coalesce(sum(rejections), 0)::bigint FROM rejection_counts WHERE minute >= $1 AND minute < $2`
	args := []any{lo, hi}
	if f.Source != "" {
		query += ` AND source = $3`
		args = append(args, textSafe(f.Source))
	}
	var n int64
	if err := db.pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("rejections not stored: %w", err)
	}
	return n, nil
}

// SweepRejectionCounts deletes at most limit counts of minutes before cutoff, oldest
// first, and returns how many it deleted. The dashboard's hourly totals keep them. Only
// one replica sweeps at a time (sweepRejectionsLock); while another does, this deletes
// nothing and returns 0.
func (db *DB) SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if granted, err := db.tryLock(ctx, tx, sweepRejectionsLock); err != nil || !granted {
			return err
		}
		// The batch is read by the primary key, which begins with the minute.
		tag, err := tx.Exec(ctx, `DELETE FROM rejection_counts WHERE (minute, source, status) IN (
			SELECT minute, source, status FROM rejection_counts WHERE minute < $1 ORDER BY minute LIMIT $2)`,
			millis(cutoff)/minuteMillis, limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep rejection counts: %w", err)
	}
	return n, nil
}
