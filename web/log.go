package web

// Log attribute keys. One meaning has one key, spelled the same in every package that
// logs it (web, receiver, cmd/hookdedup), so that a search of the log finds them all.
const (
	logComponent = "component" // the part of the program that logs (console, receiver, dispatch, sweep)
	logErr       = "err"       // the error
	logMethod    = "method"    // the request's HTTP method
	logPath      = "path"      // the request's URL path
	logUser      = "user"      // the user an action concerns
	logBy        = "by"        // the user who did it
	logRole      = "role"      // a user's role
	logSource    = "source"    // a source's name
	logKey       = "key"       // an idempotency key
	logAction    = "action"    // what was done to a key (release, reprocess)
	logFrom      = "from"      // a value before a change (a role, a key's state)
	logTo        = "to"        // the value after it
	logSessions  = "sessions"  // how many sessions
	logToken     = "token"     // an API token's id
	logName      = "name"      // a name given to a thing (an API token)
	logRemote    = "remote"    // the client's address
)
