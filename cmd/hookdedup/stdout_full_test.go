package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPrintedOutput_FullDisk: sources and service print what an operator saves to a
// file (`hookdedup service > /etc/systemd/system/hookdedup.service`): on a full disk
// they fail, naming it, rather than exit 0 over a file cut short.
func TestPrintedOutput_FullDisk(t *testing.T) {
	full := devFull(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(cfg, []byte(sourcesTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"ADYEN_HMAC_KEY": adyenKey}[k] }
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"sources", "--config", cfg, "--database", filepath.Join(dir, "test.db")},
		getenv, strings.NewReader(""), full, &stderr)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("sources to a full disk: %v, want an error that says no space is left", err)
	}
	e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: full, stderr: &stderr}
	err = serviceUnits([]string{"--backup-timer", "--database", filepath.Join(dir, "test.db")}, e, "/usr/local/bin/hookdedup", nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("service to a full disk: %v, want an error that says no space is left", err)
	}
}
