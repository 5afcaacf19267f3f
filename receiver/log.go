package receiver

// Log attribute keys. One meaning has one key, spelled the same in every package that
// logs it (web, receiver, cmd/hookdedup), so that a search of the log finds them all.
const (
	logComponent  = "component"  // the part of the program that logs (console, receiver, dispatch, sweep)
	logErr        = "err"        // the error
	logSource     = "source"     // a source's name
	logKey        = "key"        // an idempotency key
	logRemote     = "remote"     // the client's address
	logStatus     = "status"     // an HTTP status
	logReason     = "reason"     // why, in words
	logTable      = "table"      // a database table
	logDeleted    = "deleted"    // how many rows were deleted
	logRejections = "rejections" // how many rejections
	logDropped    = "dropped"    // how many were dropped
	logAttempts   = "attempts"   // how many attempts were made
	logNext       = "next"       // when the next is due
	logItems      = "items"      // how many items a batched request carried
	logUnlogged   = "unlogged"   // how many like it since the last line went without one
)
