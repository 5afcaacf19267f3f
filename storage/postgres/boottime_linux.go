package postgres

import (
	"time"

	"golang.org/x/sys/unix"
)

// sinceBoot is the time since the machine started, suspends included, and never
// moved by setting the clock (CLOCK_BOOTTIME). Go's monotonic clock stops while the
// machine is suspended: a replica's time run on by it would fall behind the server's
// by the whole suspend, and its leases would be stamped already expired.
func sinceBoot() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}

var processStart = time.Now()
