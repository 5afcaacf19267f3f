package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A sender chooses its event ids, and a downstream the words of its errors: on an
// operator's terminal, U+202E would show evt_\u202egnp.exe as evt_exe.png, U+3164 would
// make a key look like the one without it, and ESC or CSI (U+009B) would start a
// sequence the terminal acts on.
const (
	hiddenKey         = "evt_\u202egnp.exe"
	hiddenKeyShown    = `evt_\u202egnp.exe`
	fillerKey         = "evt_1\u3164"
	fillerKeyShown    = `evt_1\u3164`
	csiKey            = "evt_\u009b2J"
	csiKeyShown       = `evt_\u009b2J`
	hiddenError       = "HTTP 502 \x1b[2J\u2067bad gateway\u2069"
	hiddenErrorShown  = `HTTP 502 \u001b[2J\u2067bad gateway\u2069`
	hiddenSource      = "ota\u200b"
	hiddenSourceShown = `ota\u200b`
)

// hiddenIn returns the first character of out that a terminal would not show as
// itself (a control character other than the line breaks and the tabwriter's spaces, a
// format character such as a bidi control, an invisible filler), or "" for none.
func hiddenIn(out string) string {
	for _, r := range out {
		if r == '\n' {
			continue
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) ||
			unicode.Is(unicode.Zp, r) || r == '\u3164' {
			return string(r)
		}
	}
	return ""
}

// TestCLI_KeysShowHiddenCharacters: keys and release list stored keys, sources and last
// errors with the characters that would hide themselves or rewrite the terminal written
// as escapes, as the console and the CSV export show them.
func TestCLI_KeysShowHiddenCharacters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ source, key string }{{"ota", hiddenKey}, {"ota", fillerKey}, {"ota", csiKey}, {hiddenSource, "k"}} {
		if err := db.Record(ctx, &storage.Delivery{Source: k.source, Key: k.key, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := db.LeaseDue(ctx, time.Now(), time.Minute, 10, []string{"ota"})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key != hiddenKey {
			continue
		}
		if _, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: time.Now(),
			Status: 502, Error: hiddenError}, storage.AttemptResult{Failed: true, LastError: hiddenError}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cli := cliOn(path)

	out, err := cli("keys")
	if err != nil {
		t.Fatalf("keys: %v\n%s", err, out)
	}
	for _, want := range []string{hiddenKeyShown, fillerKeyShown, csiKeyShown, hiddenErrorShown, hiddenSourceShown} {
		if !strings.Contains(out, want) {
			t.Errorf("keys: the listing does not show %s:\n%s", want, out)
		}
	}
	if r := hiddenIn(out); r != "" {
		t.Errorf("keys: the listing holds %q as it is:\n%s", r, out)
	}

	out, err = cli("release", "--source", "ota", "--state", "failed", "--reason", "downstream back")
	if err != nil {
		t.Fatalf("release --state failed: %v\n%s", err, out)
	}
	if want := "ota/" + hiddenKeyShown + ": failed -> released\n"; !strings.Contains(out, want) {
		t.Errorf("release --state failed: want %q in\n%s", want, out)
	}
	if r := hiddenIn(out); r != "" {
		t.Errorf("release --state failed: the listing holds %q as it is:\n%s", r, out)
	}

	out, err = cli("release", "--source", "ota", fillerKey, "--reason", "downstream back")
	if err == nil {
		t.Fatalf("release of a key in flight: no error\n%s", out)
	}
	if want := "ota/" + fillerKeyShown + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("release of a key in flight: %q; want it to start with %q", err, want)
	}
}

// TestKey_ShowsHiddenCharacters: `hookdedup key` shows the event id it reads from a
// payload, and the fields it derives a key from, as the console's key lab does.
func TestKey_ShowsHiddenCharacters(t *testing.T) {
	const config = `
[[source]]
name = "pms"
signature = "none"
event_id = "/id"
key_fields = ["/booking_id"]
`
	for body, want := range map[string][]string{
		`{"id":"` + hiddenKey + `","booking_id":"B-1"}`: {hiddenKeyShown},
		`{"id":"","booking_id":"B-\u202e1\u3164"}`:      {`B-\u202e1\u3164`},
		`{"id":"","booking_id":"B-\u20661\u2069"}`:      {`B-\u20661\u2069`},
	} {
		out, err := keyWith(t, t.TempDir(), config, body, "--source", "pms")
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: want %q in\n%s", body, w, out)
			}
		}
		if r := hiddenIn(out); r != "" {
			t.Errorf("%s: the explanation holds %q as it is:\n%s", body, r, out)
		}
	}
}

// keysOn stores a claim of each of keys, of source ota, in a new database, and returns
// the database's path.
func keysOn(t *testing.T, keys ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range keys {
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: k, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// listedKeys is the KEY column of a keys listing.
func listedKeys(out string) []string {
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		keys = append(keys, strings.Fields(line)[1])
	}
	return keys
}

// TestCLI_KeysBackslashNotAnEscape: a key a sender writes with a backslash, the six
// characters \u202e, is listed apart from the key that holds U+202E, whose listing
// shows that escape: else either passes for the other, and an operator who gives
// release what keys showed, as a bash $'…', releases the other one.
func TestCLI_KeysBackslashNotAnEscape(t *testing.T) {
	const literal = `evt_\u202egnp.exe` // as sent: a backslash, then u202e
	cli := cliOn(keysOn(t, hiddenKey, literal))
	out, err := cli("keys")
	if err != nil {
		t.Fatalf("keys: %v\n%s", err, out)
	}
	shown := listedKeys(out)
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

// TestCLI_KeysShownReadBack: what keys shows of a key, escapes and all, is read back
// into the key as stored by bash's printf %b, as the README's script gives release a
// key it picked from the listing: given the escapes themselves, release would look for
// another key.
func TestCLI_KeysShownReadBack(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	keys := []string{"evt_1", hiddenKey, fillerKey, csiKey, `evt_\u202egnp.exe`, `evt_\c\0`, "evt_\xff"}
	out, err := cliOn(keysOn(t, keys...))("keys")
	if err != nil {
		t.Fatalf("keys: %v\n%s", err, out)
	}
	var got []string
	for _, shown := range listedKeys(out) {
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
