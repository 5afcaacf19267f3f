package main

import (
	"bytes"
	"context"
	"encoding/json"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// startConfigured runs serve in-process on 127.0.0.1:0 with toml as its config file, in
// a temp dir, until the test ends. It returns the config file's path, the database's
// and the base URL.
func startConfigured(t *testing.T, toml string) (cfgPath, dbPath, base string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath = filepath.Join(dir, "hookdedup.toml")
	dbPath = filepath.Join(dir, "hookdedup.db")
	if err := os.WriteFile(cfgPath, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(cfgPath, true, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.Database = "127.0.0.1:0", dbPath
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	p, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of its context ending")
		}
		p.close()
	})
	return cfgPath, dbPath, p.public.url()
}

// runDemoCmd runs `hookdedup demo` in-process with args and returns what it printed.
func runDemoCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr lockedBuffer
	err := run(context.Background(), append([]string{"demo"}, args...), func(string) string { return "" },
		strings.NewReader(""), &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

// Every preset can be demonstrated: demo --provider sends that sender's traffic, in
// its shape and signature, to a source configured with only the provider and a secret,
// and the server accepts it and catches its redeliveries. For a batch sender, one
// request of the run carries accepted and duplicate items at once.
func TestDemo_Provider(t *testing.T) {
	names := provider.Names()
	if len(senderDemos) != len(names) {
		t.Fatalf("demos for %d senders, want one for each of %v", len(senderDemos), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := provider.Lookup(name)
			cfgPath, dbPath, base := startConfigured(t, "[[source]]\nname = \"my-"+name+"\"\nprovider = \""+name+
				"\"\nsecret = \""+presetSecret(p)+"\"\n")
			out, err := runDemoCmd(t, "--config", cfgPath, "--database", dbPath, "--url", base,
				"--provider", name, "--events", "6")
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out)
			}
			if !strings.Contains(out, "0 rejected") || strings.Contains(out, "rejected:") {
				t.Fatalf("demo reports rejections:\n%s", out)
			}

			db, err := sqlite.Open(dbPath, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			c, err := storagetest.CountDeliveries(ctx, db, "my-"+name)
			if err != nil {
				t.Fatal(err)
			}
			if c.Accepted != 6 || c.Duplicate < 1 || c.Rejected != 0 {
				t.Fatalf("stored %+v; want 6 accepted, a duplicate and no rejection\n%s", c, out)
			}
			if p.Batch == "" {
				return
			}
			page, err := db.Deliveries(ctx, storage.DeliveryFilter{Source: "my-" + name, Limit: 200})
			if err != nil {
				t.Fatal(err)
			}
			outcomes := map[int64][]storage.Outcome{}
			for _, d := range page.Deliveries {
				outcomes[d.Batch] = append(outcomes[d.Batch], d.Outcome)
			}
			mixed := false
			for b, o := range outcomes {
				mixed = mixed || b != 0 && slices.Contains(o, storage.Accepted) && slices.Contains(o, storage.Duplicate)
			}
			if !mixed {
				t.Fatalf("no request held both accepted and duplicate items: %v\n%s", outcomes, out)
			}
			// Adyen answers only "[accepted]": the demo read each item's outcome from
			// the database and printed it.
			if !strings.Contains(out, "  item 0: ") || !strings.Contains(out, "duplicate of ") {
				t.Fatalf("demo did not print each item's outcome:\n%s", out)
			}
		})
	}
}

// The source a provider demo sends to is the first configured with that provider, else
// the one named after it, and any other choice is refused with a reason.
func TestDemo_ProviderSource(t *testing.T) {
	cfgPath, dbPath, base := startConfigured(t, `
[[source]]
name = "cards"
provider = "stripe"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

[[source]]
name = "mews"
signature = "token"
token_query = "token"
secret = "a-long-random-shared-token"
batch = "/Events"
key_fields = ["/Discriminator", "/Value"]
`)
	demo := func(args ...string) (string, error) {
		return runDemoCmd(t, append([]string{"--config", cfgPath, "--database", dbPath, "--url", base, "--events", "2"}, args...)...)
	}
	if out, err := demo("--provider", "stripe"); err != nil || !strings.Contains(out, "/webhooks/cards") {
		t.Fatalf("stripe by provider: %v\n%s", err, out)
	}
	if out, err := demo("--provider", "mews"); err != nil || !strings.Contains(out, "/webhooks/mews") {
		t.Fatalf("mews by name: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "adyen"}, `no source has provider = "adyen" and none is named "adyen"`},
		{[]string{"--provider", "adyen", "--source", "cards"}, `source "cards" has provider "stripe", not "adyen"`},
		{[]string{"--provider", "stripe", "--source", "nope"}, `no source "nope"`},
		{[]string{"--provider", "paypal"}, `"paypal" is not a known provider`},
	} {
		out, err := demo(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestDemo_RejectedDeliveriesFail: a demo signed with another secret than the server's
// (the wrong --config or --database, a server started on another database) has every
// delivery rejected; it prints what it was answered and fails, saying what to check,
// for demo and demo --provider alike, so that a setup check or a smoke test that runs
// demo does not pass.
func TestDemo_RejectedDeliveriesFail(t *testing.T) {
	_, dbPath, base := startConfigured(t, "[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\nsecret = \""+testSecret+
		"\"\nevent_id = \"header:webhook-id\"\nkey_fields = [\"/booking_id\"]\n\n"+
		"[[source]]\nname = \"cards\"\nprovider = \"stripe\"\nsecret = \""+testSecret+"\"\n")
	const other = "whsec_b3RoZXJzZWNyZXRvdGhlcnNlY3JldG90aGVyc2VjcmV0"
	otherCfg := filepath.Join(t.TempDir(), "other.toml")
	writeFile(t, otherCfg, []byte("[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\nsecret = \""+other+
		"\"\nevent_id = \"header:webhook-id\"\nkey_fields = [\"/booking_id\"]\n\n"+
		"[[source]]\nname = \"cards\"\nprovider = \"stripe\"\nsecret = \""+other+"\"\n"))
	for _, tc := range []struct {
		args    []string
		summary string
		source  string
	}{
		{[]string{"--events", "3", "--duplicates", "0"}, "0 accepted, 0 duplicate, 3 rejected", "ota"},
		{[]string{"--provider", "stripe", "--events", "2"}, "0 accepted, 0 duplicate, ", "cards"},
	} {
		out, err := runDemoCmd(t, append([]string{"--config", otherCfg, "--database", dbPath, "--url", base}, tc.args...)...)
		if !strings.Contains(out, tc.summary) {
			t.Errorf("%v: want every delivery rejected; got (err %v):\n%s", tc.args, err, out)
		}
		if err == nil || !strings.Contains(err.Error(), "deliveries were rejected") || !strings.Contains(err.Error(), `source "`+tc.source+`"`) {
			t.Errorf("%v: %v; want an error saying deliveries to %s were rejected\n%s", tc.args, err, tc.source, out)
		}
	}
}

// TestDemo_UnreachableServerMasksToken: a provider that authenticates with a token in
// the URL's query (mews, apaleo, cloudbeds) has it in every request the demo sends; when
// no server answers, the error shows the URL masked, as everywhere hookdedup shows one,
// never the token.
func TestDemo_UnreachableServerMasksToken(t *testing.T) {
	for _, name := range []string{"mews", "apaleo", "cloudbeds"} {
		t.Run(name, func(t *testing.T) {
			const secret = "secret-0123456789abcdef-demo"
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "hookdedup.toml")
			toml := "addr = \"" + freeAddr(t) + "\"\n[[source]]\nname = \"" + name + "\"\nprovider = \"" + name + "\"\nsecret = \"" + secret + "\"\n"
			if err := os.WriteFile(cfgPath, []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runDemoCmd(t, "--config", cfgPath, "--database", filepath.Join(dir, "hookdedup.db"),
				"--provider", name, "--events", "1")
			if err == nil {
				t.Fatalf("demo with no server: no error\n%s", out)
			}
			if strings.Contains(err.Error()+out, secret) {
				t.Errorf("the token is shown in clear: %v\n%s", err, out)
			}
			if !strings.Contains(err.Error(), "is hookdedup serve running?") || !strings.Contains(err.Error(), "=xxxxx") {
				t.Errorf("error %q: want the server's URL with its query masked", err)
			}
		})
	}
}

// TestDemo_DuplicatesOutOfRange: --duplicates outside 0 to 1, NaN included (which
// strconv reads as a float), is refused before anything is sent.
func TestDemo_DuplicatesOutOfRange(t *testing.T) {
	for _, v := range []string{"NaN", "-0.1", "1.5", "+Inf"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"demo", "--duplicates", v, "--url", "http://127.0.0.1:1", "--database", filepath.Join(t.TempDir(), "x.db")},
			func(string) string { return "" }, strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), "--duplicates "+v+": want a fraction from 0 to 1") {
			t.Errorf("demo --duplicates %s: %v, want it refused", v, err)
		}
	}
}

// Channex's webhook page shows the booking event naming its revision in
// payload.revision_id; the events of one status (booking_new, booking_modification,
// booking_cancellation) name it in payload.booking_revision_id, as the unmapped room
// and rate events and non_acked_booking do. The demo sends them so, so that it goes
// through both places the preset reads the revision from.
func TestDemo_ChannexRevisionField(t *testing.T) {
	g := &senderGen{rnd: mrand.New(mrand.NewPCG(1, 2)), now: time.Unix(1767225600, 0)}
	seen := map[string]bool{}
	for range 200 {
		var ev struct {
			Event   string            `json:"event"`
			Payload map[string]string `json:"payload"`
		}
		if err := json.Unmarshal(channexEvent(g).body, &ev); err != nil {
			t.Fatal(err)
		}
		seen[ev.Event] = true
		want, not := "booking_revision_id", "revision_id"
		if ev.Event == "booking" {
			want, not = not, want
		}
		if ev.Payload[want] == "" || ev.Payload[not] != "" {
			t.Fatalf("%s event's payload %v: want the revision in %s, as Channex sends it", ev.Event, ev.Payload, want)
		}
	}
	for _, e := range []string{"booking", "booking_new", "booking_modification", "booking_cancellation"} {
		if !seen[e] {
			t.Errorf("no %s event in 200", e)
		}
	}
}
