package postgrestest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is the CPU time, user and system, that process pid has used ("self" for
// the caller), from /proc: steadier than requests/s on a shared machine, and how the
// benchmarks weigh a request on each side of the wire. Zero when it cannot be read.
func ProcessCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// ServerCPU is the CPU time of every PostgreSQL server process on the machine: the
// benchmarks' cluster's, since it is the only one while they run.
func ServerCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			total += ProcessCPU(e.Name())
		}
	}
	return total
}
