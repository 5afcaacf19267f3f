package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

const sourcesTOML = `
[[source]]
name       = "payments"
provider   = "adyen"
secret_env = "ADYEN_HMAC_KEY"
ttl        = "2160h"

[[source]]
name        = "github"
provider    = "github"
secret      = ["new-secret-value", "old-secret-value"]
forward_url = "http://127.0.0.1:9000/events"
`

// hookdedup sources prints what each source runs with, as a [[source]] table: the
// file's settings bare, the preset's and the defaults marked, secrets masked.
func TestSources_Command(t *testing.T) {
	env := map[string]string{"ADYEN_HMAC_KEY": adyenKey}
	out, stderr, err := runIn(t, sourcesTOML, env, "", "sources")
	if err != nil {
		t.Fatalf("sources: %v\n%s", err, stderr)
	}
	want := `[[source]]                                                                                                                          # POST /webhooks/payments, preset for Adyen
name                = "payments"
provider            = "adyen"
signature           = "adyen"                                                                                                       # from provider adyen
secret_env          = "ADYEN_HMAC_KEY"                                                                                              # its value is not shown
event_id            = ""                                                                                                            # from provider adyen
key_fields          = ["/merchantAccountCode", "/pspReference", "/eventCode", "/success"]                                           # from provider adyen
batch               = "/notificationItems"                                                                                          # from provider adyen
item                = "/NotificationRequestItem"                                                                                    # from provider adyen
max_batch_items     = 1000                                                                                                          # default
ttl                 = "2160h"
forward_url         = ""                                                                                                            # default
property_field      = "/merchantAccountCode"                                                                                        # from provider adyen
booking_field       = "/merchantReference"                                                                                          # from provider adyen
status_field        = "/eventCode"                                                                                                  # from provider adyen
amount_field        = "/amount/value"                                                                                               # from provider adyen
currency_field      = "/amount/currency"                                                                                            # from provider adyen
amount_minor_units  = true                                                                                                          # from provider adyen
no_money            = ["/success = false", "/eventCode = REFUND_FAILED|CAPTURE_FAILED"]                                             # from provider adyen
business_key        = ["/merchantAccountCode", "/merchantReference", "/eventCode", "/amount/value", "/amount/currency", "/success"] # from provider adyen
business_window     = "336h"                                                                                                        # default
business_key_blocks = false                                                                                                         # default
answer              = "[accepted]"                                                                                                  # from provider adyen
form_encoded        = false                                                                                                         # default

[[source]]                                         # POST /webhooks/github, preset for GitHub
name            = "github"
provider        = "github"
signature       = "github"                         # from provider github
secret          = ["••••••••••••", "••••••••••••"] # in the configuration file; the first signs, the others still verify
event_id        = "header:X-GitHub-Delivery"       # from provider github
key_fields      = []                               # default
batch           = ""                               # default
ttl             = "192h"                           # from provider github
forward_url     = "http://127.0.0.1:9000/events"
max_attempts    = 10                               # default
attempt_timeout = "10s"                            # default
max_backoff     = "10m"                            # default
property_field  = ""                               # from provider github
booking_field   = ""                               # from provider github
status_field    = "/action"                        # from provider github
amount_field    = ""                               # default
answer          = "json"                           # from provider github
form_encoded    = true                             # from provider github
`
	if out != want {
		t.Errorf("sources printed:\n%s\nwant:\n%s", out, want)
	}
	for _, secret := range []string{adyenKey, "new-secret-value", "old-secret-value"} {
		if strings.Contains(out+stderr, secret) {
			t.Errorf("a secret is printed: %s", secret)
		}
	}
}

// A mistake in a source is reported as everywhere else, naming the source and setting.
func TestSources_Command_UnknownProvider(t *testing.T) {
	_, _, err := runIn(t, "[[source]]\nname = \"pay\"\nprovider = \"adyn\"\nsecret = \"x\"\n", nil, "", "sources")
	if err == nil || !strings.Contains(err.Error(), `source "pay": provider: "adyn" is not a known provider (want one of adyen, apaleo,`) {
		t.Fatalf("error %v", err)
	}
}

// The console gets the same settings, the same marks, and the provider's name and note.
func TestConsoleSources_Preset(t *testing.T) {
	cfg, sources, err := loadSources(t, sourcesTOML, map[string]string{"ADYEN_HMAC_KEY": adyenKey})
	if err != nil {
		t.Fatal(err)
	}
	got := consoleSources(sources, cfg)
	pay := got[0]
	if pay.Provider != "adyen" || pay.ProviderTitle != "Adyen" || !strings.Contains(pay.ProviderNote, "HMAC") {
		t.Errorf("provider %q %q %q", pay.Provider, pay.ProviderTitle, pay.ProviderNote)
	}
	marks := map[string]string{}
	for _, s := range pay.Settings {
		switch {
		case s.FromPreset:
			marks[s.Name] = "preset"
		case s.Default:
			marks[s.Name] = "default"
		default:
			marks[s.Name] = "file"
		}
		if s.Name == "secret" || s.Name == "secret_env" {
			t.Errorf("secret setting %s listed among the settings; the secrets are shown apart, masked", s.Name)
		}
	}
	for name, want := range map[string]string{"ttl": "file", "name": "file", "signature": "preset", "batch": "preset",
		"currency_field": "preset", "answer": "preset", "forward_url": "default"} {
		if marks[name] != want {
			t.Errorf("%s marked %q, want %q", name, marks[name], want)
		}
	}
	if len(pay.Secrets) != 1 || pay.Secrets[0].Origin != "from environment variable ADYEN_HMAC_KEY" {
		t.Errorf("secrets %+v", pay.Secrets)
	}
	if gh := got[1]; gh.CurrencyField != "" || len(gh.Secrets) != 2 || gh.Provider != "github" {
		t.Errorf("github: %+v", gh)
	}
}

// TestSourcesAndKey_WithoutSecretEnv: sources and key show no secret and sign nothing,
// so they run where a source's secret_env variable is not set (a shell on the server,
// the variable being the service's): the settings and a derivation as usual. demo signs,
// and still needs it.
func TestSourcesAndKey_WithoutSecretEnv(t *testing.T) {
	dir := t.TempDir()
	cfgPath, dbPath := filepath.Join(dir, "hookdedup.toml"), filepath.Join(dir, "hookdedup.db")
	writeFile(t, cfgPath, []byte(`
[[source]]
name       = "ota"
signature  = "standard-webhooks"
secret_env = "OTA_SECRET"

[[source]]
name       = "adyen"
provider   = "adyen"
secret_env = "ADYEN_HMAC_KEY"

[[source]]
name       = "gh"
signature  = "github"
secret     = "in-the-file"
secret_env = "GH_SECRET"
`))
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cli := func(env map[string]string, stdin string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--config", cfgPath, "--database", dbPath),
			func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
		return out.String(), err
	}
	out, err := cli(nil, "", "sources")
	if err != nil || !strings.Contains(out, `"OTA_SECRET"`) || !strings.Contains(out, `"ADYEN_HMAC_KEY"`) || !strings.Contains(out, `"GH_SECRET"`) {
		t.Fatalf("sources without the variables: %v\n%s", err, out)
	}
	if strings.Contains(out, "placeholder") || strings.Contains(out, "whsec_AAAA") {
		t.Errorf("sources shows a placeholder secret:\n%s", out)
	}
	out, err = cli(nil, `{"booking_id":"BK-1"}`, "key", "--source", "ota", "--header", "webhook-id: msg_1")
	if err != nil || !strings.Contains(out, "msg_1") {
		t.Fatalf("key without the variable: %v\n%s", err, out)
	}
	if _, err := cli(nil, "", "demo", "--url", "http://127.0.0.1:9"); err == nil || !strings.Contains(err.Error(), "OTA_SECRET") {
		t.Errorf("demo without the variable: %v; want an error naming OTA_SECRET", err)
	}
	// Set, a variable is read as before: a malformed secret is still an error.
	if _, err := cli(map[string]string{"OTA_SECRET": "not-whsec", "ADYEN_HMAC_KEY": "00", "GH_SECRET": "x"}, "", "sources"); err == nil ||
		!strings.Contains(err.Error(), "secret") {
		t.Errorf("sources with a malformed secret in the variable: %v; want an error", err)
	}
}

// forward_url may carry the downstream's credentials: hookdedup sources, whose output
// goes to terminals and tickets, shows it as the console does, and so does the error of
// one that is not an http(s) URL.
func TestSources_RedactsForwardURL(t *testing.T) {
	const conf = `
[[source]]
name        = "ota"
provider    = "github"
secret      = "s"
forward_url = "https://hook:hunter2@pms.example/in?token=tok-123&site=9"
`
	out, stderr, err := runIn(t, conf, nil, "", "sources")
	if err != nil {
		t.Fatalf("sources: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, `forward_url     = "https://hook:xxxxx@pms.example/in?site=xxxxx&token=xxxxx"`) {
		t.Errorf("forward_url not shown redacted:\n%s", out)
	}
	for _, secret := range []string{"hunter2", "tok-123"} {
		if strings.Contains(out+stderr, secret) {
			t.Errorf("sources printed %q", secret)
		}
	}
	_, stderr, err = runIn(t, strings.Replace(conf, "https://", "ftp://", 1), nil, "", "sources")
	if said := fmt.Sprint(err) + stderr; err == nil || !strings.Contains(said, "forward_url") || strings.Contains(said, "hunter2") ||
		strings.Contains(said, "tok-123") {
		t.Errorf("a forward_url that is no http(s) URL: %v\n%s; want an error naming it, without its credentials", err, stderr)
	}
}
