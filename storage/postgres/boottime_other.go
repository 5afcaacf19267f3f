//go:build !linux

package postgres

import "time"

// sinceBoot is the time since the process started by Go's monotonic clock, where no
// clock that counts suspends is at hand.
func sinceBoot() time.Duration { return time.Since(processStart) }

var processStart = time.Now()
