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

// TestCLI_KeysBackslashNotAnEscape: a key a sender writes with a backslash, the six
// characters \u202e, is listed apart from the key that holds U+202E, whose listing
// shows that escape: else either passes for the other, and an operator who gives
// release what keys showed, as a bash $'…', releases the
// other one.
func TestCLI_KeysBackslashNotAnEscape(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const literal = `evt_\u202egnp.exe` // as sent: a backslash, then u202e
	for _, k := range []string{hiddenKey, literal} {
		if err := db.Record(ctx, &storage.Delivery{Source: "ota", Key: k, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cli := cliOn(path)

	out, err := cli("keys")
	if err != nil {
		t.Fatalf("keys: %v\n%s", err, out)
	}
	var shown []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		shown = append(shown, strings.Fields(line)[1])
	}
	if len(shown) != 2 || shown[0] == shown[1] {
		t.Fatalf("keys: %q; want the two keys shown apart:\n%s", shown, out)
	}
	for _, s := range shown {
		if s != hiddenKeyShown && s != `evt_\\u202egnp.exe` {
			t.Errorf("keys: %q shown; want %q for the key with U+202E and %q for the one with a backslash", s, hiddenKeyShown, `evt_\\u202egnp.exe`)
		}
	}

	out, err = cli("release", "--source", "ota", literal, "--reason", "a test")
	if err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	if want := `ota/evt_\\u202egnp.exe: `; !strings.HasPrefix(out, want) {
		t.Errorf("release: %q; want it to start with %q", out, want)
	}
}
