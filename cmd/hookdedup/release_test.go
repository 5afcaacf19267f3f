package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestCLI_ReleaseRefused: release says why it left a key as it was in the refusal's
// fixed words, for one key and in bulk, and exits non-zero.
func TestCLI_ReleaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Being handed downstream since now: not stuck for stuck_after (10 min).
	err = db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "busy", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--database", path),
			func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		return out.String(), err
	}
	why := "ota/busy: " + storage.RefusedBusy.Message()

	if _, err := cli("release", "--source", "ota", "busy", "--reason", "r"); err == nil || err.Error() != why {
		t.Errorf("release of a key in flight: %v; want %q", err, why)
	}
	out, err := cli("release", "--source", "ota", "--state", "processing", "--reason", "r")
	if err == nil || err.Error() != "1 keys could not be released" ||
		out != why+"\n1 keys matched, 0 changed, 1 refused\n" {
		t.Errorf("bulk release of a key in flight: %v\n%s", err, out)
	}
}
