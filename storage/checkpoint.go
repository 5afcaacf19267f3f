package storage

import (
	"database/sql"
	"time"
)

// Checkpoints: under WAL, committed pages are appended to the -wal file and later copied
// into the database file by a checkpoint. By default SQLite runs that checkpoint inside
// the commit that takes the WAL past 1000 pages, so one batch of deliveries in every few
// paid for copying everything the others wrote: a sixth of the intake writer's time
// (a batch of ~24 took 2.3 ms with it, 1.85 without), and the p99. Instead a goroutine of its own checkpoints on its own connection, shortly
// after commits, while the writer goes on (a PASSIVE checkpoint takes no write lock).

const (
	// checkpointEvery is how soon after a commit the checkpointer copies it: a tenth of
	// a second of intake is a few thousand pages at most.
	checkpointEvery = 100 * time.Millisecond

	// fallbackCheckpointPages is the writer's own automatic checkpoint, kept as a
	// backstop: a checkpoint that runs beside a busy writer never quite catches up with
	// it, and the WAL can only start over from its beginning once all of it is in the
	// database file, so the writer does that last step itself when the WAL reaches
	// 16 MiB (of 4 KiB pages). That step copies what the checkpointer has not copied yet
	// and waits for the database file's fsync: with a million keys stored, pages all over
	// a large file, it held the writer for 50-80 ms. At 64 MiB the p99 of a loaded
	// server with a million keys was 72-76 ms; at 16 MiB, 48-51 ms (fewer pages behind
	// each time); throughput did not tell the two apart.
	fallbackCheckpointPages = 4096

	// walSizeLimit is what the -wal file is cut back to when it starts over.
	walSizeLimit = 64 << 20
)

// checkpointer runs PASSIVE checkpoints on cp after commits (a send on db.committed),
// at most once per checkpointEvery, until Close.
func (db *DB) checkpointer(cp *sql.DB) {
	defer close(db.checkpointerDone)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-db.closing:
			return
		case <-db.committed:
		}
		select {
		case <-db.closing:
			return
		case <-tick.C:
		}
		// A failure here is the database's (disk, permissions): the writer meets it too,
		// and answers for it; the WAL then just waits for the next checkpoint.
		var busy, logPages, done int
		_ = cp.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &done)
	}
}

// noteCommit wakes the checkpointer without ever blocking the writer.
func (db *DB) noteCommit() {
	select {
	case db.committed <- struct{}{}:
	default:
	}
}
