package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// warmKeysSQL reads the next warmChunk entries of the claims' key index (the
// UNIQUE (source, key) constraint's) after (?1, ?2), and returns the last of them: one
// short read of a stretch of its leaves, walked without reading the table.
const warmKeysSQL = `SELECT source, key FROM claims INDEXED BY sqlite_autoindex_claims_1
WHERE (source, key) > (?1, ?2) ORDER BY source, key LIMIT 1 OFFSET ?3`

// warmChunk is how many index entries one read transaction of warmKeys walks, about a
// hundred pages: a read transaction held open keeps the checkpointer from copying what
// was committed since it began, and one pass over a 5 M-key index held it for seconds
// while the WAL grew past 64 MiB. In short transactions the checkpointer copies all but
// the last few milliseconds' commits, but the WAL cannot start over while one is open
// nearly all the time: at 5 M keys read from the disk under load it grew to 45 MiB
// over the read's 12 s, and started over once the read ended. Short, they also leave
// the write connection, which they run on, to intake between them. A var for tests.
var warmChunk = 4096

// warmKeys reads the claims' key index once, so that its pages are at hand before
// deliveries need them. Open runs it when the file is larger than bigFileSize. Every
// new key lands on a leaf of that index that no recent key touched; in a file that the
// cache does not hold (after a restart, or after other files pushed it out) each such
// leaf is a read from the disk that the one writer waits for. With 5 M keys stored and
// the file out of the cache, all-unique traffic ran at 0.5-0.7× the requests/s of the
// same file cached, with 50-90 µs more server CPU a request (a read from this virtual
// disk costs the guest about 45 µs), until the deliveries had read most of the index
// back themselves. Read ahead, the 200 MiB index of 5 M keys took 12 s from the disk
// (5 s of CPU, mostly the disk reads') and 1 s (0.8 s of CPU) when the file was
// cached.
//
// It reads on the write connection, between intake's transactions, which take the
// connection in turn with its reads: each connection maps the file on its own, and a
// process takes a page fault for each page of a map it touches first. Read on a read
// connection, the index was in the file system's cache, but the writer still took a
// fault for each page of it that a new key touched. At 5 M keys, all unique, in the
// first 8 s after a start and in the next (serve's minor faults in /proc): 1.4-3.3 and
// 0.34-0.56 faults a request read on a read connection, against 0.46-0.75 and
// 0.05-0.07; from a cold cache (drop_caches), 189 and 4,669 requests a second against
// 2,225 and 7,945 (a read on a read connection, then another on the writer's: 1,984
// and 6,184).
func (db *DB) warmKeys() {
	defer close(db.warmDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-db.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	var source, key string
	for chunks := 1; ; chunks++ {
		err := db.write.QueryRowContext(ctx, warmKeysSQL, source, key, warmChunk-1).Scan(&source, &key)
		db.warmReads.Add(1)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			db.log.Info("read the claims' key index ahead of deliveries", "reads", chunks,
				"took", time.Since(start).Round(time.Millisecond))
			return
		case err != nil:
			// Only slower until the deliveries have read the index themselves.
			if ctx.Err() == nil {
				db.log.Warn("could not read the claims' key index ahead of deliveries", "err", err)
			}
			return
		}
	}
}
