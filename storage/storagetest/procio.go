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
