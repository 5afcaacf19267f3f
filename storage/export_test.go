package storage

// WALRestarts is how many times the writer finished a checkpoint that the checkpointer
// had caught up, so that the WAL could start over (checkpoint.go).
func (db *DB) WALRestarts() int64 { return db.walRestarts.Load() }
