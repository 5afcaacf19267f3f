package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// keyIn runs `hookdedup key --source mews FILE` on a database that exists.
func keyIn(t *testing.T, dir, file string) (string, error) {
	t.Helper()
	return keyWith(t, dir, mewsConfig, "", "--source", "mews", file)
}

// keyWith runs `hookdedup key args...` with the config toml, stdin and a database that
// exists, all in dir.
func keyWith(t *testing.T, dir, toml, stdin string, args ...string) (string, error) {
	t.Helper()
	cfg, dbPath := filepath.Join(dir, "hookdedup.toml"), filepath.Join(dir, "test.db")
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var out, errb bytes.Buffer
	err = run(context.Background(), append(append([]string{"key"}, args...), "--config", cfg, "--database", dbPath),
		func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
	return out.String(), err
}

const mewsConfig = `
[[source]]
name = "mews"
signature = "token"
token_query = "token"
secret = "mews-url-token-1"
key_fields = ["/Discriminator", "/Value"]
batch = "/Events"
`

// TestKey_Batch: `hookdedup key` explains a batch item by item, with the envelope each
// item is handed downstream with (as the header spells it), and says which item would
// make intake refuse the request.
func TestKey_Batch(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"EnterpriseId":"Hôtel-7", "Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5"}},`+
		`{"Discriminator":"CustomerUpdated","Value":{"Id":"a5"}}]}`), 0o600)
	out, err := keyIn(t, dir, good)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 items at /Events",
		`envelope  handed downstream with each item as X-Hookdedup-Batch-Envelope: {"EnterpriseId":"H\u00f4tel-7"}`,
		"item 0", "item 1", `"CustomerAdded"`, `"CustomerUpdated"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "derived:") < 2 {
		t.Errorf("output does not give two keys:\n%s", out)
	}

	// An envelope too large for a header goes by its size, as the dispatcher sends it.
	large := filepath.Join(dir, "large.json")
	pad := strings.Repeat("é", 700) // 4,200 bytes as the header spells it
	os.WriteFile(large, []byte(`{"Pad":"`+pad+`","Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a6"}}]}`), 0o600)
	if out, err := keyIn(t, dir, large); err != nil ||
		!strings.Contains(out, "envelope  handed downstream with each item as X-Hookdedup-Batch-Envelope-Omitted: 4210 bytes") {
		t.Errorf("err %v, output:\n%s\nwant the envelope's size in X-Hookdedup-Batch-Envelope-Omitted", err, out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5"}},{"Other":1}]}`), 0o600)
	out, err = keyIn(t, dir, bad)
	if err == nil || !strings.Contains(err.Error(), "item 1: no key") || !strings.Contains(out, "item 0") {
		t.Fatalf("err %v, output:\n%s\nwant item 0 explained and item 1 named as the refusal", err, out)
	}
}

// TestKey_BatchItemsSharingAKey: two items of one request with one key are claimed in one
// transaction, the first accepted and the second its duplicate; `hookdedup key` says so of
// the second, as the key lab does, instead of that a delivery of it would be accepted.
func TestKey_BatchItemsSharingAKey(t *testing.T) {
	dir := t.TempDir()
	twice := filepath.Join(dir, "twice.json")
	os.WriteFile(twice, []byte(`{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a7"}},`+
		`{"Discriminator":"CustomerAdded","Value":{"Id":"a7"}},{"Discriminator":"CustomerAdded","Value":{"Id":"a8"}}]}`), 0o600)
	out, err := keyIn(t, dir, twice)
	if err != nil {
		t.Fatal(err)
	}
	_, item1, _ := strings.Cut(out, "item 1")
	item1, item2, _ := strings.Cut(item1, "item 2")
	if !strings.Contains(item1, "item 0 of this request has the same key") || strings.Contains(item1, "would be accepted") {
		t.Errorf("item 1 is not said to be item 0's duplicate:\n%s", out)
	}
	if !strings.Contains(item2, "would be accepted") {
		t.Errorf("item 2, of a key of its own, is not said to be accepted:\n%s", out)
	}
}

// TestKey_MaxBody: a payload over max_body is reported as intake would answer it, 413,
// whether it comes from a file or from stdin: neither "would be accepted" (a file, once
// read whole) nor invalid JSON (stdin, once cut at max_body). One of max_body bytes
// exactly is keyed.
func TestKey_MaxBody(t *testing.T) {
	const maxBody = 1 << 20 // the default
	const config = `
[[source]]
name = "ota"
signature = "token"
token_query = "token"
secret = "ota-url-token-1"
event_id = "/id"
`
	// payload is a JSON object of exactly n bytes.
	payload := func(n int) string {
		const head, tail = `{"id":"evt_1","pad":"`, `"}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	dir := t.TempDir()
	over, fits := filepath.Join(dir, "over.json"), filepath.Join(dir, "fits.json")
	if err := os.WriteFile(over, []byte(payload(1_100_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fits, []byte(payload(maxBody)), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"File", "", []string{"--source", "ota", over}, "the payload is 1100000 bytes, over max_body (1048576 bytes): intake would answer 413"},
		{"Stdin", payload(1_100_000), []string{"--source", "ota"}, "the payload is 1048577 bytes or more, over max_body (1048576 bytes): intake would answer 413"},
		{"StdinDash", payload(1_100_000), []string{"--source", "ota", "-"}, "the payload is 1048577 bytes or more, over max_body"},
		{"SmallerMaxBody", "", []string{"--source", "ota", fits, "--max-body", "1000"}, "the payload is 1048576 bytes, over max_body (1000 bytes)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := keyWith(t, dir, config, c.stdin, c.args...)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want %q\n%s", err, c.want, out)
			}
			if strings.Contains(out, "claimed") {
				t.Errorf("a refused payload is explained as if intake took it:\n%s", out)
			}
		})
	}

	for name, c := range map[string]struct {
		stdin string
		args  []string
	}{
		"FitsFile":  {"", []string{"--source", "ota", fits}},
		"FitsStdin": {payload(maxBody), []string{"--source", "ota"}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := keyWith(t, dir, config, c.stdin, c.args...)
			if err != nil || !regexp.MustCompile(`(?m)^key\s+evt_1$`).MatchString(out) || !strings.Contains(out, "a delivery now would be accepted") {
				t.Fatalf("a payload of max_body bytes: %v\n%s", err, out)
			}
		})
	}
}

// TestKey_FormEncoded: a form-encoded delivery to a source that takes them is keyed on its
// payload field, as intake keys it, with the content type given as a header.
func TestKey_FormEncoded(t *testing.T) {
	dir := t.TempDir()
	const toml = `
[[source]]
name = "gh"
signature = "github"
secret = "x"
form_encoded = true
`
	form := "payload=" + url.QueryEscape(`{"action":"opened","number":7}`)
	out, err := keyWith(t, dir, toml, form, "--source", "gh",
		"--header", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"--header", "Content-Type: application/x-www-form-urlencoded")
	if err != nil || !strings.Contains(out, "72d3162e-cc78-11e3-81ab-4c9367dc0958") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}

	_, err = keyWith(t, dir, toml, "action=opened", "--source", "gh",
		"--header", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"--header", "Content-Type: application/x-www-form-urlencoded")
	if err == nil || !strings.Contains(err.Error(), "no payload field") {
		t.Errorf("err %v for a form without payload, want intake's refusal", err)
	}
}

// TestKey_SignedMessageIDRequired: on a standard-webhooks source the signature covers
// the message id, so intake refuses a delivery without one (401) whatever its key
// fields; `key` says so, with intake's own words, instead of deriving a key that no
// delivery is ever given. With the id, or with Svix's spelling of it, it keys as before.
func TestKey_SignedMessageIDRequired(t *testing.T) {
	const config = `
[[source]]
name = "ota"
signature = "standard-webhooks"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
key_fields = ["/property_id", "/booking_id"]
`
	const body = `{"property_id":"HTL-LIS-01","booking_id":"BK-1042"}`
	dir := t.TempDir()
	out, err := keyWith(t, dir, config, body, "--source", "ota")
	const want = "intake would answer 401 and key nothing: signature: missing header webhook-id"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no webhook-id: %v; want an error containing %q", err, want)
	}
	if strings.Contains(out, "would be accepted") || strings.Contains(out, "derived:") {
		t.Errorf("no webhook-id: a key was derived for a delivery intake refuses:\n%s", out)
	}
	for _, h := range []string{"webhook-id: msg_1", "svix-id: msg_1"} {
		out, err := keyWith(t, dir, config, body, "--source", "ota", "--header", h)
		if err != nil || !regexp.MustCompile(`(?m)^key +msg_1$`).MatchString(out) {
			t.Errorf("--header %q: %v; want the key msg_1:\n%s", h, err, out)
		}
	}
}
