package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestServe_SecondServeOnOneFileRefused: a second serve on a SQLite file that a serve
// already runs on (two would both take deliveries, dispatch and sweep the one file)
// refuses to start, naming the database, the lock file and the pid that holds it; the
// commands an operator runs meanwhile still work; once the first stops, a serve starts.
func TestServe_SecondServeOnOneFileRefused(t *testing.T) {
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(filepath.Join(dir, "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Database = filepath.Join(dir, "hookdedup.db")
	ctx := context.Background()
	var stdout, stderr lockedBuffer
	first, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	lock := cfg.Database + sqlite.ServeLockSuffix
	if fi, err := os.Stat(lock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("serve lock %s: %v, %v; want a file of mode 0600", lock, fi, err)
	}

	var stdout2, stderr2 lockedBuffer
	second, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout2, stderr: &stderr2})
	if err == nil {
		second.close()
		first.close()
		t.Fatal("a second serve on the same database started")
	}
	if !errors.Is(err, sqlite.ErrServed) {
		t.Errorf("second serve: %v, want ErrServed", err)
	}
	for _, want := range []string{cfg.Database, lock, "pid " + strconv.Itoa(os.Getpid()), "another hookdedup serve"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second serve's error %q does not name %q", err, want)
		}
	}

	// The commands an operator runs while serve runs do not take the lock.
	for _, args := range [][]string{
		{"user", "list", "--database", cfg.Database},
		{"token", "list", "--database", cfg.Database},
		{"backup", filepath.Join(dir, "copy.db"), "--database", cfg.Database},
	} {
		var out, errOut lockedBuffer
		if err := run(ctx, args, getenv, strings.NewReader(""), &out, &errOut); err != nil {
			t.Errorf("%v while serve runs: %v (%s)", args, err, errOut.String())
		}
	}

	first.close()
	third, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout2, stderr: &stderr2})
	if err != nil {
		t.Fatalf("serve after the first one stopped: %v", err)
	}
	third.close()
}
