package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSources_PrintsMaxBatchItems: `sources` prints every setting a source runs with,
// a batched source's max_batch_items among them.
func TestSources_PrintsMaxBatchItems(t *testing.T) {
	const cfg = `
[[source]]
name            = "cm"
signature       = "none"
key_fields      = ["/id"]
batch           = "/items"
max_batch_items = 5
`
	out, stderr, err := runIn(t, cfg, nil, "", "sources")
	if err != nil {
		t.Fatalf("sources: %v\n%s", err, stderr)
	}
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "max_batch_items") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("sources does not print max_batch_items, which the source sets to 5:\n%s", out)
	}
	if f := strings.Fields(line); len(f) < 3 || f[2] != "5" {
		t.Errorf("sources printed %q, want max_batch_items = 5", line)
	}
}

// TestConfig_DatabaseURLPasswordWithAtRefused: a password holding an unencoded @ (and
// none of / ? #) is refused, unshown, as the other characters are: connected to, the
// error would quote what follows the @ as the host it could not resolve. (Go's resolver
// refuses a host name with an @ without asking DNS; nothing leaves the machine.)
func TestConfig_DatabaseURLPasswordWithAtRefused(t *testing.T) {
	const leaked = "leakedpart"
	url := "postgres://hook:topsecret@" + leaked + "@127.0.0.1:1/hookdedup?connect_timeout=2"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	getenv := func(k string) string {
		if k == "HOOKDEDUP_DATABASE" {
			return url
		}
		return ""
	}
	cfg := filepath.Join(t.TempDir(), "hookdedup.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run(ctx, []string{"keys", "--config", cfg}, getenv, strings.NewReader(""), &out, &errb)
	if err == nil {
		t.Fatal("keys on a URL whose password holds an unencoded @: no error")
	}
	msg := err.Error() + errb.String()
	if strings.Contains(msg, leaked) {
		t.Errorf("the error shows part of the password (%q):\n%s", leaked, msg)
	}
	if !strings.Contains(msg, "percent-encode") {
		t.Errorf("the URL was not refused for its unencoded password, as the README says:\n%s", msg)
	}
}
