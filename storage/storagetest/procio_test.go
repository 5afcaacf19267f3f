package storagetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestProcessIO checks that the counters move by what this process reads and writes.
func TestProcessIO(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io here")
	}
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 1<<20)
	before := storagetest.ProcessIO("self")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	after := storagetest.ProcessIO("self")
	if d := after.Written - before.Written; d < int64(len(data)) {
		t.Errorf("written %d bytes, counted %d", len(data), d)
	}
	if d := after.Read - before.Read; d < int64(len(data)) {
		t.Errorf("read %d bytes, counted %d", len(data), d)
	}
	if after.Writes <= before.Writes || after.Reads <= before.Reads {
		t.Errorf("calls not counted: %+v then %+v", before, after)
	}
	if io := storagetest.ProcessIO("0"); io != (storagetest.IO{}) {
		t.Errorf("no process 0 in /proc, got %+v", io)
	}
}
