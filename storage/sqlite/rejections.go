package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

const minuteMillis = 60000

// AddRejectionCounts adds counts to the rejections counted without a delivery row, and
// to the dashboard's hourly totals of rejected deliveries (DeliveryStats), in one
// transaction: the dashboard then shows every rejection, stored or only counted. The
// totals count unknown names (StatusUnknownSource) together, under UnknownSources.
func (db *DB) AddRejectionCounts(ctx context.Context, counts []storage.RejectionCount) error {
	if len(counts) == 0 {
		return nil
	}
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		for _, c := range counts {
			if c.Rejections <= 0 {
				continue
			}
			minute := millis(c.Minute) / minuteMillis
			if _, err := tx.ExecContext(ctx, `
INSERT INTO rejection_counts (minute, source, status, rejections) VALUES (?, ?, ?, ?)
ON CONFLICT (minute, source, status) DO UPDATE SET rejections = rejections + excluded.rejections`,
				minute, c.Source, c.Status, c.Rejections); err != nil {
				return err
			}
			source := c.Source
			if c.Status == storage.StatusUnknownSource {
				source = storage.UnknownSources
			}
			if _, err := tx.ExecContext(ctx, `
INSERT INTO delivery_stats (source, hour, outcome, deliveries) VALUES (?, ?, 'rejected', ?)
ON CONFLICT (source, hour, outcome, currency) DO UPDATE SET deliveries = deliveries + excluded.deliveries`,
				source, minute*minuteMillis/3600000, c.Rejections); err != nil {
				return err
			}
		}
		return nil
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
	var n int64
	err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(rejections), 0) FROM rejection_counts
		WHERE minute >= ? AND minute < ? AND (? = '' OR source = ?)`, lo, hi, f.Source, f.Source).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("rejections not stored: %w", err)
	}
	return n, nil
}

// SweepRejectionCounts deletes at most limit counts of minutes before cutoff, oldest
// first, and returns how many it deleted. The dashboard's hourly totals keep them.
func (db *DB) SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res, err := db.writeExec(ctx, `
DELETE FROM rejection_counts WHERE (minute, source, status) IN (
	SELECT minute, source, status FROM rejection_counts WHERE minute < ? ORDER BY minute LIMIT ?)`,
		millis(cutoff)/minuteMillis, limit)
	if err != nil {
		return 0, fmt.Errorf("sweep rejection counts: %w", err)
	}
	return res.RowsAffected()
}
