package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// Checkpoints: under WAL, committed pages are appended to the -wal file and later copied
// into the database file by a checkpoint. By default SQLite runs that checkpoint inside
// the commit that takes the WAL past 1000 pages, so one batch of deliveries in every few
// paid for copying everything the others wrote: a sixth of the intake writer's time
// (a batch of ~24 took 2.3 ms with it, 1.85 without), and the p99. Instead a goroutine
// of its own checkpoints on its own connection, shortly after commits, while the writer
// goes on (a PASSIVE checkpoint takes no write lock).
//
// Two things about SQLite's checkpoints shape the rest:
//
//   - A pass that cannot reach the end of the WAL (the writer committed meanwhile)
//     copies its pages into the database file but does not fsync it: only a pass that
//     copies everything does, and it then flushes every page copied since the last one
//     that did. With a million keys stored those are pages all over a large file, a
//     thousand or two of them, and the writer's backstop (below) waited 30-50 ms for
//     them. So after each pass the checkpointer starts the disk writing the pages it
//     copied (sync_file_range), beside the writer, and fsyncs the file itself before
//     it hands the final pass to the writer: what is left for that pass is the last
//     few pages. It does not fsync after every pass: each fsync also flushes the
//     disk's cache, and a commit's own fsync that came meanwhile waited for it. On an
//     empty database, 64 callers, that made one batch in twenty take over 4 ms, and
//     the p99 12.7-14.6 ms against 10.1-10.5 ms with writes started instead (and
//     restartPages below at 4096 rather than 1024).
//   - The WAL starts over from its beginning only once every page of it is in the
//     database file and no transaction is open, a moment that the checkpointer alone
//     never finds beside a busy writer. See restartPages.

const (
	// checkpointEvery is how soon after a commit the checkpointer copies it. The
	// scattered pages a pass copies are written while commits write the WAL, so small
	// passes keep those writes short: with a million keys stored, and an fsync after
	// each pass, the p99 was 21-23 ms at 50 ms against 26-31 ms at 100 ms, while 25 ms
	// cost an empty database 10 % of its throughput.
	checkpointEvery = 50 * time.Millisecond

	// smallFileCheckpointEvery is how soon after its last pass the checkpointer copies
	// again while the database file is under bigFileSize. There the pages a pass copies
	// are mostly the same few again (the right edges of the tables and indexes, their
	// parents), and its fsync is short: a pass every 50 ms copied and flushed those
	// pages twenty times a second. With this wait (or checkpointRows) the store wrote
	// 0.90-0.96× the bytes and took 0.87-0.97× the CPU a delivery on an empty
	// database, 64 callers in one process. Past bigFileSize the pages of a pass lie all
	// over the file, and the short passes above keep their writes short.
	smallFileCheckpointEvery = 250 * time.Millisecond

	// checkpointRows is how many deliveries committed since the last pass make the
	// next one due whatever the time: on a faster machine the WAL that a longer wait
	// lets grow must stay well within the writer's backstop (fallbackCheckpointPages),
	// at a page or two of WAL a delivery.
	checkpointRows = 1024

	// restartPages is the WAL length (in 4 KiB pages) from which the checkpointer sees
	// to it that the WAL starts over. Each of its passes copies what was committed
	// before the pass began, and the writer commits more meanwhile; so it runs passes
	// back to back until one had little to copy (a short pass: little was committed
	// during it), then asks the writer to run the last pass itself between two batches
	// (finishCheckpoint), a pass of a few pages that nothing can interrupt. The
	// writer's next transaction starts the WAL over. That last pass holds the writer
	// about 3 ms: at 1024 pages it came nine times a second on an empty database under
	// load, at 4096 four or five times.
	restartPages = 4096

	// catchUpPasses bounds the back-to-back passes; smallTail is how few pages the last
	// of them copies for the checkpointer to call the WAL caught up. With 5 M keys a
	// pass of a few hundred scattered pages takes 5-10 ms, in which the writer adds
	// about as many, so the passes level off at 200-450 pages: at 256 the WAL often
	// never counted as caught up there and the backstop struck instead.
	catchUpPasses = 4
	smallTail     = 512

	// fallbackCheckpointPages is the writer's own automatic checkpoint, kept as a
	// backstop for when the checkpointer cannot catch up (a slow disk): the commit that
	// takes the WAL past 64 MiB copies what the checkpointer has not and waits for the
	// fsync, which with a million keys stored holds the writer 30-50 ms: kept rare, or it
	// sets the p99. Four times restartPages: a catch-up under 64 senders ends at 27-47
	// MiB. Under synchronous=NORMAL, whose commits come faster, it reaches the backstop;
	// at eight times restartPages the p99 and the rate there were the same. (A reader
	// holding an old snapshot keeps the WAL from starting over, backstop or not.)
	fallbackCheckpointPages = 4 * restartPages

	// walSizeLimit is what the -wal file is cut back to when it starts over.
	walSizeLimit = 64 << 20
)

// checkpointer runs PASSIVE checkpoints on db.cp after commits (a send on db.committed),
// at most once per checkpointEvery (smallFileCheckpointEvery or checkpointRows while the
// file is small), until Close, and sees to it that the WAL starts over once it is
// restartPages long.
func (db *DB) checkpointer() {
	defer close(db.checkpointerDone)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	lastPass, rowsAtPass := time.Now(), db.batchRows.Load()
	// A failure is the database file's (the disk, its size limit): an operator who
	// sees the -wal file grow learns why from the log, and when it ends.
	failures := outage.New(db.log.With("path", db.path), slog.LevelError,
		"a checkpoint failed: the write-ahead log grows until one copies it into the database file",
		"checkpoints copy the write-ahead log into the database file again")
	for {
		select {
		case <-db.closing:
			return
		case <-db.committed:
		}
		// writerFull: the file is past bigFileSize (growWriterCache), a pass every tick.
		for due := false; !due; {
			select {
			case <-db.closing:
				return
			case <-tick.C:
			}
			due = db.writerFull.Load() || time.Since(lastPass) >= smallFileCheckpointEvery ||
				db.batchRows.Load()-rowsAtPass >= checkpointRows
		}
		lastPass, rowsAtPass = time.Now(), db.batchRows.Load()
		// A failure here is the database file's (the disk, its size limit): the WAL
		// grows until a checkpoint succeeds, and deliveries go on while it has room.
		logPages, caughtUp, err := db.checkpointPass()
		if db.leftPath(err) {
			return
		}
		failures.Note(time.Now(), err)
		if err != nil || !caughtUp || logPages < restartPages {
			continue
		}
		for range catchUpPasses {
			before := logPages
			logPages, caughtUp, err = db.checkpointPass()
			if db.leftPath(err) {
				return
			}
			failures.Note(time.Now(), err)
			if err != nil || !caughtUp {
				break
			}
			if logPages-before <= smallTail {
				// What the passes copied is on its way to the disk (checkpointPass):
				// waiting for it here, not in the writer's final pass, leaves that
				// pass its own few pages to flush.
				db.cpFsyncs.Add(1)
				err := db.syncFile()
				failures.Note(time.Now(), err)
				if err == nil {
					db.walRestart.Store(true)
				}
				break
			}
		}
	}
}

// leftPath reports whether err, a checkpoint's failure, is the database file's leaving
// its path (checkFile), which the log has said once, with the restart that mends it: a
// checkpoint failure beside it would point the operator at the disk, and nothing more
// can be copied into a file that has left. The checkpointer then stops.
func (db *DB) leftPath(err error) bool {
	return err != nil && errors.Is(db.checkFile(), storage.ErrFileGone)
}

// checkpointPass runs one PASSIVE checkpoint on the checkpointer's connection and starts
// the disk writing what it copied, without waiting for it or flushing the disk's cache
// (SQLite's own fsync, before the WAL starts over, makes it durable). It returns how
// many pages the WAL held when the pass began and whether it copied all of them
// (another checkpoint, the writer's, can hold it off).
func (db *DB) checkpointPass() (logPages int, caughtUp bool, err error) {
	logPages, caughtUp, done, err := passiveCheckpoint(db.cp)
	if err == nil && done > 0 {
		db.cpPasses.Add(1)
		if err := db.writeBack(); err != nil {
			return 0, false, err
		}
	}
	return logPages, caughtUp, err
}

// writeBack starts the disk writing the database file's dirty pages (sync_file_range)
// and returns without waiting. Where that call fails it fsyncs instead: for a regular
// file the call fails only where the kernel lacks it (ENOSYS) or a sandbox forbids it
// (EPERM), or on the disk's own error, which the fsync reports too. Failing the pass
// instead would keep the checkpointer from ever catching up there, and leave every
// start of the WAL to the writer's backstop.
func (db *DB) writeBack() error {
	if db.startWriteBack(int(db.file.Fd())) == nil {
		return nil
	}
	db.cpFallbacks.Add(1)
	return db.syncFile()
}

// syncFile waits until the disk holds the database file's pages (fdatasync).
func (db *DB) syncFile() error {
	if err := db.fdatasyncFile(int(db.file.Fd())); err != nil {
		return fmt.Errorf("fsync %s: %w", db.path, err)
	}
	return nil
}

// startWriteBack starts the disk writing the dirty pages of the file fd, without waiting
// for them; fdatasyncFile waits until the disk holds them. Open gives them to each DB
// (DB.startWriteBack, DB.fdatasyncFile); tests replace them.
var (
	startWriteBack = syncFileRange
	fdatasyncFile  = syscall.Fdatasync
)

// finishCheckpoint is the writer's last pass of a catch-up, between two batches: with no
// transaction open it copies the few pages the checkpointer could not, and SQLite fsyncs
// them, so the next batch starts the WAL over. A failure is left to the backstop.
func (db *DB) finishCheckpoint() {
	if _, caughtUp, _, err := passiveCheckpoint(db.write); err == nil && caughtUp {
		db.walRestarts.Add(1)
	}
}

// passiveCheckpoint runs PRAGMA wal_checkpoint(PASSIVE) on c: how many pages the WAL held
// when it began, whether it copied all of them, and how many it has copied in all.
func passiveCheckpoint(c *sql.DB) (logPages int, caughtUp bool, done int, err error) {
	var busy int
	if err := c.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &done); err != nil {
		return 0, false, 0, err
	}
	return logPages, busy == 0 && done == logPages, done, nil
}

// noteCommit wakes the checkpointer without ever blocking the writer.
func (db *DB) noteCommit() {
	select {
	case db.committed <- struct{}{}:
	default:
	}
}
