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
