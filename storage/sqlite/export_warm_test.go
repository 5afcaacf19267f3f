package sqlite

// WarmDone is closed once the read of the claims' key index that Open started has
// ended, or at once if Open started none.
func (db *DB) WarmDone() <-chan struct{} { return db.warmDone }
