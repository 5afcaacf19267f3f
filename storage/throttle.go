package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Throttle is a sign-in throttling policy for one scope (a name at an address, or an
// address): it slows guessing down without ever shutting the scope out for good. Free
// failures are let through at once; from then on each failure makes the scope wait
// before its next try, First after the Free-th failure, twice as long after each further
// one, never longer than Max. A scope with no failure for Forget starts again from
// nothing (Forget is at most a day: older counts are deleted).
type Throttle struct {
	Free   int
	First  time.Duration
	Max    time.Duration
	Forget time.Duration
}

// Wait is how long a scope waits after its last failure when it has failed n times.
func (t Throttle) Wait(n int) time.Duration {
	if n < t.Free {
		return 0
	}
	d := t.First
	for i := t.Free; i < n && d < t.Max; i++ {
		d *= 2
	}
	return min(d, t.Max)
}

// ThrottleKey is the key a scope's failures are stored under: the hex SHA-256 of the
// scope. A scope names what it counts (a session id, a device cookie's id, a name as
// typed, which may be a password typed into the wrong field, a client's address), and
// none of that may stand in the database, its backups or a copy in clear; counting
// needs only a key that is the same for the same scope and differs between scopes.
// The digest is plain, not keyed: every process on the database must agree on it, and
// a key would have to be kept in that same database, beside the rows it hides.
func ThrottleKey(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(sum[:])
}

// DeviceKey is what the devices table keeps of a device cookie's id: its hex SHA-256.
// The cookie keys stand in the database's settings, so anyone who reads the database
// (a backup, a copy) can make a device cookie; it is believed only for an id the table
// holds, and the table holds no id to put in one.
func DeviceKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
