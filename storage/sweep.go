package storage

import "context"

// SweepCursor is where a retention sweep goes on from. The zero value starts a walk.
// Its fields belong to the engine that made it: callers pass it back unchanged.
type SweepCursor struct {
	Last     int64 // the last delivery looked at
	Upto     int64 // the walk's last delivery
	Finished bool
}

// Done reports whether the sweep has looked at every delivery received before its cutoff.
func (c SweepCursor) Done() bool { return c.Finished }

// Rollups are the daily roll-ups that the retention sweep must not get ahead of.
type Rollups interface {
	RollupStats(ctx context.Context, limit int) (int, error)
	RollupLedger(ctx context.Context, limit int) (int, error)
}

// CatchUpRollups folds into the dashboard's and the ledger's totals what they have not
// counted yet, in a bounded number of rounds, as far as the engine lets it (PostgreSQL
// waits for the transactions still open, and for another replica rolling up). The
// retention sweep runs it before a walk, and deletes nothing the totals have not
// counted: a delivery deleted first would be missing from them for good.
func CatchUpRollups(ctx context.Context, r Rollups) error {
	const batch = 10000
	for _, roll := range []func(context.Context, int) (int, error){r.RollupStats, r.RollupLedger} {
		for range 100 {
			n, err := roll(ctx, batch)
			if err != nil {
				return err
			}
			if n < batch {
				break
			}
		}
	}
	return nil
}
