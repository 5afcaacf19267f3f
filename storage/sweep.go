package storage

import (
	"context"
	"fmt"
	"time"
)

// SweepExpired deletes at most limit claims that expired at or before now, through the
// index on expires_at, and returns how many it deleted. Keys still being handed
// downstream are kept: their work must not be lost. Expiry never waits for the sweep (a
// claim takes over an expired row itself); the sweep only keeps the table small.
func (db *DB) SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	res, err := db.write.ExecContext(ctx, `
DELETE FROM claims WHERE id IN (
	SELECT id FROM claims WHERE expires_at <= ? AND state != 'processing' ORDER BY expires_at LIMIT ?)`,
		millis(now), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep expired claims: %w", err)
	}
	return res.RowsAffected()
}

// SweepDeliveries deletes at most limit deliveries received before cutoff, oldest first,
// and returns how many it deleted.
func (db *DB) SweepDeliveries(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res, err := db.write.ExecContext(ctx, `
DELETE FROM deliveries WHERE id IN (
	SELECT id FROM deliveries WHERE received_at < ? ORDER BY received_at LIMIT ?)`,
		millis(cutoff), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep old deliveries: %w", err)
	}
	return res.RowsAffected()
}
