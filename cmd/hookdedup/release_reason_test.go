package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestCLI_ReleaseReasonChecked: `hookdedup release --reason` checks the reason as the
// console and the API do: a terminal escape sequence (kept in the audit log for good,
// replayed on the terminal of whoever runs `audit export` to stdout) and a reason past
// the bound are refused, named.
func TestCLI_ReleaseReasonChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k1", "k2"} {
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cli := cliOn(path)
	for key, reason := range map[string]string{
		"k1": "refund\x1b[2J\x1b[1;1Hall fine",
		"k2": strings.Repeat("x", 600),
	} {
		if out, err := cli("release", "--source", "ota", key, "--reason", reason); err == nil {
			t.Errorf("release %s with a reason of %d bytes holding %q...: taken (%s); want it refused as the console and the API refuse it",
				key, len(reason), reason[:min(len(reason), 12)], strings.TrimSpace(out))
		}
	}
}

// TestCLI_ReleaseReasonStoredAsChecked: the reason kept in the audit log is the one
// checked, trimmed as the console and the API trim it. A control character that counts
// as white space (a form feed, U+0085) at either end was checked away but stored, and
// a reason of the longest length with blanks around it was stored past the bound.
func TestCLI_ReleaseReasonStoredAsChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{
		"k1": "\fPMS restored\u0085",
		"k2": "  " + strings.Repeat("x", storage.MaxReason) + "\v ",
	}
	for key := range reasons {
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cli := cliOn(path)
	for key, reason := range reasons {
		if out, err := cli("release", "--source", "ota", key, "--reason", reason); err != nil {
			t.Fatalf("release %s: %v (%s)", key, err, out)
		}
	}
	db, err = sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries, err := db.AuditLog(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range entries {
		reason, ok := reasons[e.Key]
		if !ok || e.Action != "release" {
			continue
		}
		found++
		if want := strings.TrimSpace(reason); e.Reason != want {
			t.Errorf("audit row of %s keeps the reason %q; want %q, the reason as checked", e.Key, e.Reason, want)
		}
		if p := storage.ReasonProblem(e.Reason); p != "" {
			t.Errorf("audit row of %s keeps a reason the console would refuse: %s", e.Key, p)
		}
	}
	if found != len(reasons) {
		t.Fatalf("%d release rows in the audit log, want %d", found, len(reasons))
	}
}
