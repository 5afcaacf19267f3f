package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestCLI_KeysShownReadBack: what keys shows of a key, escapes and all, is read back
// into the key as stored by bash's printf %b, as the README's script gives release a
// key it picked from the listing: given the escapes themselves, release would look for
// another key.
func TestCLI_KeysShownReadBack(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"evt_1", hiddenKey, fillerKey, csiKey, `evt_\u202egnp.exe`, `evt_\c\0`, "evt_\xff"}
	for _, k := range keys {
		if err := db.Record(ctx, &storage.Delivery{Source: "ota", Key: k, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, err := cliOn(path)("keys")
	if err != nil {
		t.Fatalf("keys: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		shown := strings.Fields(line)[1]
		key, err := exec.Command(bash, "-c", `printf %b "$1"`, "-", shown).Output()
		if err != nil {
			t.Fatalf("printf %%b %s: %v", shown, err)
		}
		got = append(got, string(key))
	}
	slices.Sort(got)
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Errorf("keys read back: %q; want %q\n%s", got, keys, out)
	}
}
