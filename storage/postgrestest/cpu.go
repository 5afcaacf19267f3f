package postgrestest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// ClusterCPU returns a function that reports the CPU time of the processes of the
// PostgreSQL cluster that serves url: its postmaster and the processes it started (the
// connections' backends, the WAL writer, the checkpointer): not the clusters that other
// tests on the machine start and stop meanwhile, whose processes come and go (one that
// exits takes its CPU time with it).
func ClusterCPU(tb testing.TB, url string) func() time.Duration {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	var backend int
	err = conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend)
	// The backend's parent is read while its connection is open: once it closes, the
	// backend exits, and its /proc entry with it.
	postmaster := parentOf(strconv.Itoa(backend))
	conn.Close(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if postmaster == "" {
		tb.Fatalf("no parent process of PostgreSQL backend %d", backend)
	}
	return func() time.Duration {
		total := ProcessCPU(postmaster)
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err == nil && parentOf(e.Name()) == postmaster {
				total += ProcessCPU(e.Name())
			}
		}
		return total
	}
}

// parentOf is the id of the parent of process pid, "" if it is gone.
func parentOf(pid string) string {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ""
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
