package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// lockedBuffer is a log that a test reads while others write it.
type lockedBuffer = storagetest.LogBuffer

// TestServe_Program builds serve in-process with its timeouts set, checks that they
// reach the HTTP server, serves a request, and stops: the log says serving, shutting
// down and stopped, in that order.
func TestServe_Program(t *testing.T) {
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(filepath.Join(dir, "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Database = filepath.Join(dir, "hookdedup.db")
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = time.Second, 2*time.Second, 3*time.Second, 4*time.Second
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	got := [4]time.Duration{p.public.srv.ReadHeaderTimeout, p.public.srv.ReadTimeout, p.public.srv.WriteTimeout, p.public.srv.IdleTimeout}
	if want := [4]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; got != want {
		t.Errorf("server timeouts %v, want the configured %v", got, want)
	}
	if !strings.Contains(stdout.String(), "created user admin with one-time password: ") {
		t.Errorf("stdout %q: want the first admin's password", stdout.String())
	}

	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	resp, err := http.Get(p.public.url() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", resp.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of its context ending")
	}
	if !strings.Contains(stdout.String(), "hookdedup listening on "+p.public.url()) {
		t.Errorf("stdout %q: want the listening line", stdout.String())
	}
	order := regexp.MustCompile(`(?s)msg=serving .*msg="shutting down: finishing requests in flight".*msg=stopped`)
	if log := stderr.String(); !order.MatchString(log) {
		t.Errorf("log does not say serving, shutting down, stopped in that order:\n%s", log)
	}
}

// TestServe_StopsOnNewerSchema: once a newer version records a migration this build does
// not have (its serve, on another replica, migrated the database), serve stops, saying
// why, and no longer answers; a restart refuses the database with the same words.
func TestServe_StopsOnNewerSchema(t *testing.T) {
	old := schemaCheckEvery
	schemaCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { schemaCheckEvery = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, cfg, e, _ := defaultProgram(t, ctx)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	health := p.public.url() + "/healthz"
	resp, err := http.Get(health)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Serving for many looks at the schema: only an unknown migration stops it.
	select {
	case err := <-done:
		t.Fatalf("run returned %v before the schema changed", err)
	case <-time.After(10 * schemaCheckEvery):
	}

	storagetest.AddMigration(t, p.db.(*sqlite.DB), "migrations/9999_later.sql")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "schema is newer than this hookdedup knows (migrations 9999_later.sql)") {
			t.Fatalf("run returned %v, want the newer schema named", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of a newer version migrating the database")
	}
	p.close()
	if resp, err := http.Get(health); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz answered %s after serve stopped", resp.Status)
	}
	if _, err := openProgram(ctx, cfg, e); err == nil || !strings.Contains(err.Error(), "9999_later.sql") {
		t.Fatalf("serve started again on the newer schema: %v", err)
	}
}

// TestServe_SIGHUPAfterStopIgnored: a SIGHUP that arrives once serve has stopped, between
// its "stopped" and its exit, leaves it to exit 0. The signal's default action ends a
// process, so the test runs itself again in a child that stops a serve, then signals
// itself, and the parent reads how the child ended.
func TestServe_SIGHUPAfterStopIgnored(t *testing.T) {
	if os.Getenv("HOOKDEDUP_TEST_HUP_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestServe_SIGHUPAfterStopIgnored$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "HOOKDEDUP_TEST_HUP_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("serve stopped, then SIGHUP: the process ended with %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "still running after SIGHUP") {
			t.Fatalf("the child did not reach its SIGHUP:\n%s", out)
		}
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	p, _, _, _ := defaultProgram(t, ctx)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	p.close()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The signal is delivered to this process before Kill returns unless it is blocked;
	// the wait lets the runtime act on it either way.
	time.Sleep(200 * time.Millisecond)
	t.Log("still running after SIGHUP")
}
