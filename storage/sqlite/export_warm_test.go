package sqlite

import (
	"context"
	"testing"
)

// WarmDone is closed once the read of the claims' key index that Open started has
// ended, or at once if Open started none.
func (db *DB) WarmDone() <-chan struct{} { return db.warmDone }

// WarmReads returns how many reads of the claims' key index warmKeys has made.
func (db *DB) WarmReads() int64 { return db.warmReads.Load() }

// SetWarmChunk makes warmKeys read n index entries at a time, for the databases opened
// after it until the test ends.
func SetWarmChunk(tb testing.TB, n int) {
	old := warmChunk
	warmChunk = n
	tb.Cleanup(func() { warmChunk = old })
}

// HoldWriter takes the write connection until release is called: no write, and no
// read made on it, runs meanwhile.
func (db *DB) HoldWriter(ctx context.Context) (release func(), err error) {
	c, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return func() { c.Close() }, nil
}
