package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_VersionTakesCommonFlags: every command takes --config and --database, version
// too, so that a wrapper that adds them to whatever it runs can ask for the version; the
// version needs neither, so neither is read, nor need the file or the database exist.
// An argument, or a flag no command takes, is still refused, naming it.
func TestCLI_VersionTakesCommonFlags(t *testing.T) {
	dir := t.TempDir()
	version := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"version"}, args...), func(string) string { return "" },
			strings.NewReader(""), &out, &errOut)
		return out.String(), err
	}
	for _, args := range [][]string{
		{"--config", filepath.Join(dir, "missing.toml")},
		{"--database", filepath.Join(dir, "missing.db")},
		{"--config=" + filepath.Join(dir, "missing.toml"), "-database", filepath.Join(dir, "missing.db")},
	} {
		if out, err := version(args...); err != nil || !strings.HasPrefix(out, "hookdedup ") {
			t.Errorf("version %q: %v, %q; want the version", args, err, out)
		}
	}
	for _, args := range [][]string{{"extra"}, {"--json"}, {"--database", "a.db", "extra"}} {
		bad := args[len(args)-1]
		if _, err := version(args...); err == nil || !strings.Contains(err.Error(), strings.TrimLeft(bad, "-")) {
			t.Errorf("version %q: %v; want it refused, naming %q", args, err, bad)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*")); len(entries) != 0 {
		t.Errorf("version made %v", entries)
	}
}
