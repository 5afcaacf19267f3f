package storagetest

import (
	"os"
	"strconv"
	"strings"
)

// IO is what a process has read and written through system calls so far: the counters
// of /proc/PID/io. Past SQLite's memory map and page cache, reads are the pages it reads
// again (and the checkpoints' reads of the WAL); writes are the WAL's frames and the
// checkpoints' copies of them.
type IO struct {
	Read, Written int64 // bytes (rchar, wchar)
	Reads, Writes int64 // calls (syscr, syscw)
}

// ProcessIO is the IO of process pid, "self" for this one; zero where /proc has none.
func ProcessIO(pid string) IO {
	var io IO
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return io
	}
	for line := range strings.Lines(string(b)) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(value, 10, 64)
		switch name {
		case "rchar":
			io.Read = n
		case "wchar":
			io.Written = n
		case "syscr":
			io.Reads = n
		case "syscw":
			io.Writes = n
		}
	}
	return io
}

// MinorFaults is how many minor page faults process pid ("self" for this one) has taken
// so far, field 10 of /proc/PID/stat; zero where /proc has none. A page of SQLite's
// memory map is a fault the first time a process touches it: what a fresh process pays
// for a large file until it has touched the pages it keeps coming back to.
func MinorFaults(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from
	// after its closing one, where field 3 starts.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 8 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[7], 10, 64)
	return n
}
