package postgrestest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// panicReportEnv, set, makes TestCleanupAfterPanic the test process that panics: it
// writes its cluster's temp dir and server pid to the file named, then panics.
const panicReportEnv = "POSTGRESTEST_PANIC_REPORT"

// TestCleanupAfterPanic: a test process that dies in a panic, so that Main never stops
// the cluster, still leaves no server running and no temp dir behind.
func TestCleanupAfterPanic(t *testing.T) {
	if report := os.Getenv(panicReportEnv); report != "" {
		NewDatabase(t)
		pid, err := os.ReadFile(filepath.Join(cl.data, "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(pid), "\n")
		if err := os.WriteFile(report, []byte(cl.dir+"\n"+first+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		panic("a test panics with the cluster running")
	}

	report := filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCleanupAfterPanic$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), panicReportEnv+"="+report)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil && bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("the test process skipped:\n%s", out)
	}
	if !bytes.Contains(out, []byte("a test panics with the cluster running")) {
		t.Fatalf("the test process did not panic (%v):\n%s", err, out)
	}
	written, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the test process wrote no report (%v):\n%s", err, out)
	}
	fields := strings.Fields(string(written))
	if len(fields) != 2 {
		t.Fatalf("report %q", written)
	}
	dir := fields[0]
	pid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("report %q: %v", written, err)
	}

	// The watchdog cleans up once the process has gone: poll, bounded.
	var left string
	for attempt := 0; attempt < 600; attempt++ {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		left = ""
		if alive(pid) {
			left = fmt.Sprintf("server (pid %d) still running", pid)
		} else if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			left = fmt.Sprintf("temp dir %s still there (%v)", dir, err)
		}
		if left == "" {
			return
		}
	}
	t.Fatalf("a minute after the test process panicked: %s", left)
}

// alive reports whether process pid runs; a zombie, which a container's init may never
// reap, does not.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
