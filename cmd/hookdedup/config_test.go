package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// runIn runs the command line in-process with a config file holding toml (none when
// toml is ""), returning stdout, stderr and the error.
func runIn(t *testing.T, toml string, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return runInContext(t, context.Background(), toml, env, stdin, args...)
}

// runInContext is runIn until ctx ends: a serve expected to refuse its configuration
// that starts instead then ends, and its test fails rather than hangs.
func runInContext(t *testing.T, ctx context.Context, toml string, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	full := append([]string{}, args...)
	if toml != "" {
		cfg := filepath.Join(dir, "hookdedup.toml")
		if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		full = append(full, "--config", cfg)
	}
	full = append(full, "--database", filepath.Join(dir, "test.db"))
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	err := run(ctx, full, getenv, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

func TestConfig_Errors(t *testing.T) {
	tests := []struct {
		name, toml string
		env        map[string]string
		want       []string // each must appear in the one error line
	}{
		{"SecretWithoutScheme", `
[[source]]
name = "ota"
signature = "none"
secret = "whsec_x"
event_id = "/id"`, nil, []string{"hookdedup.toml", `source "ota"`, "signature", `"none" checks nothing, yet a secret is set`}},
		{"SecretEnvWithoutScheme", `
[[source]]
name = "ota"
signature = "none"
secret_env = "OTA_SECRET"
event_id = "/id"`, map[string]string{"OTA_SECRET": "x"}, []string{`source "ota"`, "signature", "secret_env"}},
		{"UnknownScheme", `
[[source]]
name = "ota"
signature = "hmac"
secret = "x"
event_id = "/id"`, nil, []string{"hookdedup.toml", `source "ota"`, "signature", `unknown signature scheme "hmac"`}},
		{"BadPointer", `
[[source]]
name = "cm"
signature = "github"
secret = "x"
event_id = "data/id"`, nil, []string{`source "cm"`, "event_id", "data/id"}},
		{"DuplicateName", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
[[source]]
name = "ota"
signature = "github"
secret = "y"`, nil, []string{`source "ota"`, "name", "another source"}},
		{"BadDuration", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
ttl = "24hours"`, nil, []string{`source "ota"`, "ttl", `"24hours" is not a duration`}},
		{"ZeroMaxAttempts", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
forward_url = "http://127.0.0.1:1/"
max_attempts = 0`, nil, []string{`source "ota"`, "max_attempts", "at least 1"}},
		{"AttemptTimeoutHours", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
forward_url = "http://127.0.0.1:1/"
attempt_timeout = "10000h"`, nil, []string{`source "ota"`, "attempt_timeout", "10m0s"}},
		{"AttemptTimeoutMilliseconds", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
forward_url = "http://127.0.0.1:1/"
attempt_timeout = "10ms"`, nil, []string{`source "ota"`, "attempt_timeout", "10ms", "shorter than 1s"}},
		{"MaxBackoffMonths", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
forward_url = "http://127.0.0.1:1/"
max_backoff = "2000h"`, nil, []string{`source "ota"`, "max_backoff", "24h0m0s"}},
		{"MissingSecret", `
[[source]]
name = "ota"
signature = "stripe"`, nil, []string{`source "ota"`, "secret"}},
		{"EmptySecretEnv", `
[[source]]
name = "cm"
signature = "hmac-sha256"
signature_header = "X-Signature"
secret_env = "CM_SECRET"
event_id = "header:X-Event-Id"`, nil, []string{`source "cm"`, "secret_env", "CM_SECRET"}},
		{"SeparatorsOnlySecretEnv", `
[[source]]
name = "cm"
signature = "github"
secret_env = "CM_SECRET"`, map[string]string{"CM_SECRET": " , "}, []string{`source "cm"`, "secret_env", "CM_SECRET"}},
		{"UnknownSetting", `
adress = "127.0.0.1:1"`, nil, []string{"hookdedup.toml", `unknown setting "adress"`}},
		{"UnknownSourceSetting", `
[[source]]
name = "ota"
signature = "github"
secret = "x"
[[source]]
name = "cm"
signature = "github"
secret = "y"
evnet_id = "/id"`, nil, []string{`source "cm"`, `unknown setting "evnet_id"`}},
		{"UnknownSettingOfUnnamedSource", `
[[source]]
signature = "github"
secret = "x"
[[source]]
signature = "github"
secret = "y"
evnet_id = "/id"`, nil, []string{`source "#2"`, `unknown setting "evnet_id"`}},
		{"BadTopLevelDuration", `retention = "a month"`, nil, []string{"retention", `"a month"`}},
		{"SessionIdleOverMax", "session_idle = \"3h\"\nsession_max = \"2h\"", nil, []string{"session_idle (3h0m0s)", "session_max (2h0m0s)"}},
		{"BadSessionMax", `session_max = "forever"`, nil, []string{"session_max", `"forever"`}},
		{"BadEnv", ``, map[string]string{"HOOKDEDUP_RETENTION": "soon"}, []string{"HOOKDEDUP_RETENTION", `"soon"`}},
		{"BadTrustedProxy", `trusted_proxies = ["10.0.0.0/8", "10.0.0.0/33"]`, nil, []string{"hookdedup.toml", "trusted_proxies", `"10.0.0.0/33" is not a CIDR`}},
		{"BadTrustedProxyEnv", ``, map[string]string{"HOOKDEDUP_TRUSTED_PROXIES": "10.0.0.0/8, proxy.example"}, []string{"HOOKDEDUP_TRUSTED_PROXIES", `"proxy.example" is not a CIDR`}},
		{"BadBatchPointer", `
[[source]]
name = "adyen"
signature = "adyen"
secret = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
key_fields = ["/pspReference"]
batch = "notificationItems"`, nil, []string{`source "adyen"`, "batch", `"notificationItems" is not a JSON pointer`}},
		{"BadItemPointer", `
[[source]]
name = "adyen"
signature = "adyen"
secret = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
key_fields = ["/pspReference"]
batch = "/notificationItems"
item = "/a~2"`, nil, []string{`source "adyen"`, "item", `"/a~2"`}},
		{"PerItemSignatureWithoutItem", `
[[source]]
name = "adyen"
signature = "adyen"
secret = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
key_fields = ["/pspReference"]
batch = "/notificationItems"`, nil, []string{`source "adyen"`, `signature "adyen" signs the object inside each element`, "set item", `"/NotificationRequestItem"`}},
		{"BadLabelPointer", `
[[source]]
name = "gh"
signature = "github"
secret = "x"
property_field = "/hotel~2id"`, nil, []string{`source "gh"`, "property_field", `"/hotel~2id"`}},
		{"ItemWithoutBatch", `
[[source]]
name = "mews"
signature = "token"
token_query = "token"
secret = "x"
key_fields = ["/Value"]
item = "/Event"`, nil, []string{`source "mews"`, "item", "without batch"}},
		{"BatchKeyedOnHeader", `
[[source]]
name = "gh"
signature = "github"
secret = "x"
batch = "/events"`, nil, []string{`source "gh"`, "event_id", "header:X-GitHub-Delivery", "every item",
			`signature "github" reads the event id there unless event_id is set`}},
		{"BatchKeyedOnPresetHeader", `
[[source]]
name = "shop"
provider = "shopify"
secret = "x"
batch = "/events"`, nil, []string{`source "shop"`, "header:X-Shopify-Webhook-Id", "every item", `event_id from provider "shopify"`}},
		{"MaxBatchItemsWithoutBatch", `
[[source]]
name = "payments"
provider = "stripe"
secret = "whsec_x"
max_batch_items = 50`, nil, []string{`source "payments"`, "max_batch_items", "without batch"}},
		{"NegativeMaxBatchItems", `
[[source]]
name = "mews"
signature = "token"
token_query = "token"
secret = "x"
key_fields = ["/Value"]
batch = "/Events"
max_batch_items = -1`, nil, []string{`source "mews"`, "max_batch_items"}},
		{"EventIDNotText", `
[[source]]
name = "cm"
signature = "none"
event_id = 5`, nil, []string{"hookdedup.toml", "event_id", "array of strings"}},
		{"EventIDListNotText", `
[[source]]
name = "cm"
signature = "none"
event_id = ["/id", 5]`, nil, []string{"hookdedup.toml", "event_id[1]", "not a string"}},
		{"EventIDListRepeats", `
[[source]]
name = "cm"
signature = "none"
event_id = ["/id", "/revision_id", "/id"]`, nil, []string{`source "cm"`, `event_id[2] "/id" repeats event_id[0]`}},
		{"EventIDListWholeBody", `
[[source]]
name = "cm"
signature = "none"
event_id = ["/id", ""]`, nil, []string{`source "cm"`, `event_id[1] ""`, "whole body"}},
		{"EventIDListBadPointer", `
[[source]]
name = "cm"
signature = "none"
event_id = ["/id", "revision_id"]`, nil, []string{`source "cm"`, `event_id[1] "revision_id"`}},
		{"BatchKeyedOnHeaderInAList", `
[[source]]
name = "mews"
signature = "none"
event_id = ["/Id", "header:X-Event-Id"]
batch = "/Events"`, nil, []string{`source "mews"`, "event_id", "header:X-Event-Id", "every item"}},
		{"NotTOML", `[[source]`, nil, []string{"hookdedup.toml"}},
		{"NegativeMaxBody", `max_body = -1`, nil, []string{"hookdedup.toml", "max_body", "-1"}},
		{"ZeroMaxBody", `max_body = 0`, nil, []string{"hookdedup.toml", "max_body", "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			toml := tc.toml
			if toml == "" {
				toml = "# empty\n"
			}
			// Through key, which reads every setting; demo for a secret, which only a
			// command that signs or verifies reads.
			args := []string{"key", "--source", "ota"}
			if tc.name == "EmptySecretEnv" {
				args = []string{"demo", "--url", "http://127.0.0.1:9"}
			}
			_, _, err := runIn(t, toml, tc.env, "", args...)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
		})
	}
}

func TestConfig_SecretNeverInErrors(t *testing.T) {
	_, _, err := runIn(t, `
[[source]]
name = "ota"
signature = "standard-webhooks"
secret = "whsec_not*base64*TOPSECRET"
event_id = "/id"`, nil, "", "key", "--source", "ota")
	if err == nil || strings.Contains(err.Error(), "TOPSECRET") {
		t.Fatalf("err = %v; want an error that does not show the secret", err)
	}
}

// TestConfig_URLSecretsNeverInErrors: a URL setting that is not an http(s) URL is
// refused by name without quoting any of it, whatever shape its credentials take: one
// without "//" keeps them where a URL's redaction does not look, and one without a
// scheme has its user name for one.
func TestConfig_URLSecretsNeverInErrors(t *testing.T) {
	for _, tc := range []struct{ setting, toml, why string }{
		{"forward_url", `"https:user:TOPSECRET@pms.example/in"`, `"//" is missing after "https:"`},
		{"forward_url", `"https:TOPSECRET"`, `"//" is missing`},
		{"forward_url", `"user:TOPSECRET@pms.example/in"`, "scheme is not http or https"},
		{"forward_url", `"TOPSECRET@pms.example/in"`, "no scheme"},
		{"forward_url", `"ftp://user:TOPSECRET@pms.example/in?token=TOPSECRET"`, "scheme is not http or https"},
		{"forward_url", `"https:///in?token=TOPSECRET"`, "no host"},
		{"forward_url", `"https://pms.example/%zz?token=TOPSECRET"`, "does not parse"},
		{"forward_url", `"https://user:TOPSECRET@pms.example:0/in"`, "port 0 is out of range"},
		{"forward_url", `"https://pms.example:99999/in?token=TOPSECRET"`, "port 99999 is out of range"},
		{"acme_directory", `"https:acme:TOPSECRET@acme.example/dir"`, `"//" is missing after "https:"`},
		{"acme_directory", `"http://acme:TOPSECRET@acme.example/dir"`, "scheme is not https"},
	} {
		conf := `
[[source]]
name = "ota"
signature = "none"
event_id = "/id"
`
		if tc.setting == "forward_url" {
			conf += "forward_url = " + tc.toml + "\n"
		} else {
			conf = "acme_domains = [\"hooks.example.com\"]\n" + tc.setting + " = " + tc.toml + "\n" + conf
		}
		_, stderr, err := runIn(t, conf, nil, "", "key", "--source", "ota")
		said := fmt.Sprint(err) + stderr
		if err == nil || !strings.Contains(said, tc.setting) || !strings.Contains(said, tc.why) {
			t.Errorf("%s = %s: %v; want an error naming %s and saying %q", tc.setting, tc.toml, err, tc.setting, tc.why)
		}
		if strings.Contains(said, "TOPSECRET") {
			t.Errorf("%s = %s: the error quotes the secret: %s", tc.setting, tc.toml, said)
		}
	}
}

func TestConfig_Precedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.toml")
	os.WriteFile(path, []byte("addr = \"127.0.0.1:1111\"\ndatabase = \"file.db\"\n"), 0o600)
	f := newFlags("serve", env{getenv: func(string) string { return "" }, stderr: &bytes.Buffer{}})
	if _, err := f.parse([]string{"--config", path, "--database", "flag.db"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.load(env{getenv: func(k string) string {
		return map[string]string{"HOOKDEDUP_ADDR": "127.0.0.1:2222", "HOOKDEDUP_DATABASE": "env.db"}[k]
	}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:2222" || cfg.Database != "flag.db" {
		t.Fatalf("addr %q database %q; want the env's addr and the flag's database", cfg.Addr, cfg.Database)
	}
	if len(cfg.Sources) != 1 || cfg.Sources[0].Name != "ota" || !cfg.Sources[0].generated {
		t.Fatalf("sources = %+v, want the zero-config ota source", cfg.Sources)
	}
}

func TestFlags_AfterPositionals(t *testing.T) {
	f := newFlags("release", env{getenv: func(string) string { return "" }, stderr: &bytes.Buffer{}})
	src := f.fs.String("source", "", "")
	pos, err := f.parse([]string{"evt_1", "--source", "ota", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	if *src != "ota" || len(pos) != 2 || pos[0] != "evt_1" || pos[1] != "extra" {
		t.Fatalf("source %q positionals %q", *src, pos)
	}
}

func TestCLI_Tokens(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	cli := func(stdin string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--database", db),
			func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
		return out.String(), err
	}
	if _, err := cli("long enough password\n", "user", "add", "ana", "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("", "token", "add", "ghost"); err == nil || !strings.Contains(err.Error(), `no user "ghost"`) {
		t.Fatalf("token for an unknown user: %v", err)
	}
	tok, err := cli("", "token", "add", "ana", "--name", "grafana")
	if err != nil || !strings.HasPrefix(tok, "hdk_") {
		t.Fatalf("token add: %q %v", tok, err)
	}
	list, err := cli("", "token", "list")
	if err != nil || !strings.Contains(list, "grafana") || strings.Contains(list, strings.TrimSpace(tok)) {
		t.Fatalf("token list must name the token and never show it: %q %v", list, err)
	}
	if out, err := cli("", "token", "revoke", "1"); err != nil || !strings.Contains(out, "revoked token 1") {
		t.Fatalf("revoke: %q %v", out, err)
	}
	if _, err := cli("", "token", "revoke", "1"); err == nil {
		t.Fatal("second revoke succeeded")
	}
}

// A timestamped source must hold a key for as long as a captured copy of its delivery
// still verifies: up to twice the tolerance, since a stamp may be that far ahead.
func TestConfig_ReplayTTL(t *testing.T) {
	tests := []struct {
		name, source string
		want         []string // empty: the config is accepted
	}{
		{"StripeShortTTL", `signature = "stripe"
ttl = "2m"`, []string{`source "ota"`, "ttl 2m0s", "tolerance 5m0s", "replayed", "at least 11m0s"}},
		{"StandardWebhooksTwiceTolerance", `signature = "standard-webhooks"
tolerance = "5m"
ttl = "10m"`, []string{`source "ota"`, "ttl 10m0s", "tolerance 5m0s", "at least 11m0s"}},
		{"ConfiguredTolerance", `signature = "standard-webhooks"
tolerance = "1h"
ttl = "90m"`, []string{"ttl 1h30m0s", "tolerance 1h0m0s", "at least 2h1m0s"}},
		{"HugeTolerance", `signature = "stripe"
tolerance = "2562047h"
ttl = "24h"`, []string{"ttl 24h0m0s", "tolerance 2562047h0m0s"}},
		{"AtTheBound", `signature = "stripe"
ttl = "11m"`, nil},
		{"DefaultTTL", `signature = "standard-webhooks"
tolerance = "30m"`, nil},
		{"UntimestampedShortTTL", `signature = "github"
ttl = "1m"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			toml := "[[source]]\nname = \"ota\"\nsecret = \"whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0\"\nevent_id = \"/id\"\n" + tc.source + "\n"
			if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			getenv := func(string) string { return "" }
			cfg, err := loadConfig(path, true, getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cfg.sources(getenv, func(string) (string, error) { return "", nil })
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted; want an error naming ttl and tolerance")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// The zero-config source is timestamped too; its defaults must pass the same check.
func TestConfig_DefaultSourceReplayTTL(t *testing.T) {
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(filepath.Join(t.TempDir(), "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := cfg.sources(getenv, func(string) (string, error) { return "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 || !srcs[0].Verifier.Timestamped() || srcs[0].TTL < minReplayTTL(signature.DefaultTolerance) {
		t.Fatalf("default sources %+v: want one timestamped source whose ttl outlasts a replay", srcs)
	}
}

// TestConfig_TrustedProxies reads trusted_proxies from the file, the environment and a
// flag, each a list of CIDRs (a bare address meaning itself alone).
func TestConfig_TrustedProxies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.toml")
	os.WriteFile(path, []byte(`trusted_proxies = ["10.1.2.3/8", "192.168.1.10", "fd00::/8"]`+"\n"), 0o600)
	load := func(getenv map[string]string, args ...string) []string {
		t.Helper()
		f := newFlags("serve", env{getenv: func(k string) string { return getenv[k] }, stderr: &bytes.Buffer{}})
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.load(env{getenv: func(k string) string { return getenv[k] }})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range cfg.TrustedProxies {
			out = append(out, p.String())
		}
		return out
	}
	if got := strings.Join(load(nil), " "); got != "10.0.0.0/8 192.168.1.10/32 fd00::/8" {
		t.Errorf("from the file: %s", got)
	}
	env := map[string]string{"HOOKDEDUP_TRUSTED_PROXIES": "127.0.0.1/32, ::1"}
	if got := strings.Join(load(env), " "); got != "127.0.0.1/32 ::1/128" {
		t.Errorf("from the environment: %s", got)
	}
	if got := load(env, "--trusted-proxies", ""); len(got) != 0 {
		t.Errorf("an empty flag: %v, want none", got)
	}
}

// TestConfig_BadDurations: the file's durations are read by the TOML decoder, the
// environment's and the flags' by parseDuration; either way the one-line message names
// the setting (and its source), shows what was written and how to write it.
func TestConfig_BadDurations(t *testing.T) {
	const hint = `(write it like "90s", "10m" or "24h")`
	source := func(name, extra string) string {
		return fmt.Sprintf("[[source]]\nname = %q\nsignature = \"github\"\nsecret = \"x\"\n%s\n", name, extra)
	}
	tests := []struct {
		name, toml string
		env        map[string]string
		args       []string
		want       string // the end of the message; a file's path comes before it
	}{
		{"SourceWords", source("ota", `ttl = "5 minutes"`), nil, nil,
			`hookdedup.toml: source "ota": ttl: "5 minutes" is not a duration ` + hint},
		{"SecondSource", source("ota", "") + source("cm", `attempt_timeout = "10 s"`), nil, nil,
			`hookdedup.toml: source "cm": attempt_timeout: "10 s" is not a duration ` + hint},
		{"UnnamedSource", "[[source]]\nsignature = \"github\"\nmax_backoff = \"1d\"\n", nil, nil,
			`hookdedup.toml: source "#1": max_backoff: "1d" is not a duration ` + hint},
		{"TopLevelWords", `read_header_timeout = "ten seconds"`, nil, nil,
			`hookdedup.toml: read_header_timeout: "ten seconds" is not a duration ` + hint},
		{"SourceBareNumber", source("ota", "ttl = 86400"), nil, nil,
			`hookdedup.toml: source "ota": ttl: 86400 is not a duration: a bare number counts nanoseconds ` + hint},
		{"TopLevelBareNumber", "idle_timeout = 120", nil, nil,
			`hookdedup.toml: idle_timeout: 120 is not a duration: a bare number counts nanoseconds ` + hint},
		{"SourceNegative", source("ota", `max_backoff = "-5m"`), nil, nil,
			`hookdedup.toml: source "ota": max_backoff: -5m0s must be positive`},
		{"SourceZeroTolerance", source("ota", `tolerance = "0s"`), nil, nil,
			`hookdedup.toml: source "ota": tolerance: 0s must be positive`},
		{"TopLevelZero", `read_timeout = "0s"`, nil, nil,
			`hookdedup.toml: read_timeout: 0s must be positive`},
		{"Env", "", map[string]string{"HOOKDEDUP_READ_TIMEOUT": "30 seconds"}, nil,
			`HOOKDEDUP_READ_TIMEOUT: "30 seconds" is not a duration ` + hint},
		{"EnvNegative", "", map[string]string{"HOOKDEDUP_WRITE_TIMEOUT": "-1s"}, nil,
			`HOOKDEDUP_WRITE_TIMEOUT: "-1s" must be positive`},
		{"Flag", "", nil, []string{"--idle-timeout", "2 min"},
			`--idle-timeout: "2 min" is not a duration ` + hint},
		{"EmptyFlag", "", nil, []string{"--retention", ""},
			`--retention: "" is not a duration ` + hint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			toml := tc.toml
			if toml == "" {
				toml = "# empty\n"
			}
			_, _, err := runIn(t, toml, tc.env, "", append([]string{"key", "--source", "ota"}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); !strings.HasSuffix(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q\nwant one line ending %q", msg, tc.want)
			}
		})
	}
}

// TestConfig_Timeouts: the server's timeouts keep their values unless the file, the
// environment or a flag sets them, each over the one before.
func TestConfig_Timeouts(t *testing.T) {
	load := func(toml string, getenv map[string]string, args ...string) config {
		t.Helper()
		path := filepath.Join(t.TempDir(), "h.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		e := env{getenv: func(k string) string { return getenv[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("serve", e)
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.load(e)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	timeouts := func(c config) [4]time.Duration {
		return [4]time.Duration{c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout}
	}
	if got, want := timeouts(load("", nil)), [4]time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}; got != want {
		t.Errorf("defaults: %v, want %v", got, want)
	}
	file := "read_header_timeout = \"1s\"\nread_timeout = \"2s\"\nwrite_timeout = \"3s\"\nidle_timeout = \"4s\"\n"
	if got, want := timeouts(load(file, nil)), [4]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; got != want {
		t.Errorf("from the file: %v, want %v", got, want)
	}
	environment := map[string]string{"HOOKDEDUP_READ_HEADER_TIMEOUT": "5s", "HOOKDEDUP_IDLE_TIMEOUT": "6s"}
	if got, want := timeouts(load(file, environment)), [4]time.Duration{5 * time.Second, 2 * time.Second, 3 * time.Second, 6 * time.Second}; got != want {
		t.Errorf("file and environment: %v, want %v", got, want)
	}
	if got, want := timeouts(load(file, environment, "--read-header-timeout", "7s", "--write-timeout", "8s")), [4]time.Duration{7 * time.Second, 2 * time.Second, 8 * time.Second, 6 * time.Second}; got != want {
		t.Errorf("file, environment and flags: %v, want %v", got, want)
	}
}

// TestConfig_UnknownEnvWarns: a HOOKDEDUP_ variable that names no setting is said, with
// the setting it is a letter or two away from: a misspelt HOOKDEDUP_DATABASE would
// otherwise leave serve on a new SQLite file without a word. The command still runs.
func TestConfig_UnknownEnvWarns(t *testing.T) {
	env := map[string]string{
		"HOOKDEDUP_DATABSE":      "postgres://h@127.0.0.1/h",
		"HOOKDEDUP_SHIP_ID":      "7",
		"HOOKDEDUP_RETENTION":    "48h",
		"HOOKDEDUP_LOG_LEVL":     "debug",
		"HOOKDEDUP_CONFIG_EMPTY": "",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}

	// serve says it in its log, in the log's own format.
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	s := startServe(t, dir, nil, "--database", db)
	s.stop(t)
	log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	if !strings.Contains(string(log), `level=WARN msg="HOOKDEDUP_DATABSE is set but is no hookdedup setting: it is ignored (did you mean HOOKDEDUP_DATABASE?)"`) {
		t.Errorf("serve's log does not warn of HOOKDEDUP_DATABSE:\n%s", log)
	}

	// The other commands print it.
	var out, stderr bytes.Buffer
	err := run(context.Background(), []string{"sources", "--database", db}, func(k string) string { return env[k] },
		strings.NewReader(""), &out, &stderr)
	if err != nil {
		t.Fatalf("sources: %v\n%s", err, &stderr)
	}
	want := "warning: HOOKDEDUP_DATABSE is set but is no hookdedup setting: it is ignored (did you mean HOOKDEDUP_DATABASE?)\n" +
		"warning: HOOKDEDUP_LOG_LEVL is set but is no hookdedup setting: it is ignored (did you mean HOOKDEDUP_LOG_LEVEL?)\n" +
		"warning: HOOKDEDUP_SHIP_ID is set but is no hookdedup setting: it is ignored\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", &stderr, want)
	}
	if !strings.Contains(out.String(), "[[source]]") {
		t.Errorf("sources printed:\n%s", &out)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"HOOKDEDUP_ADDR", "HOOKDEDUP_CONSOLE_ADDR", "HOOKDEDUP_DATABASE"}
	for in, want := range map[string]string{
		"HOOKDEDUP_ADR":          "HOOKDEDUP_ADDR",
		"HOOKDEDUP_CONSOLE_ADRR": "HOOKDEDUP_CONSOLE_ADDR",
		"HOOKDEDUP_DB":           "",
		"HOOKDEDUP_DATABASE_URL": "",
		"":                       "",
	} {
		if got := nearest(in, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConfig_SourceErrorsCreateNoDatabase: a start stopped by a mistake in a source
// (a misspelt scheme, two sources of one name, a bad encoding) leaves no database
// behind: the sources are checked before it is created.
func TestConfig_SourceErrorsCreateNoDatabase(t *testing.T) {
	for name, toml := range map[string]string{
		"Scheme": "[[source]]\nname = \"ota\"\nsignature = \"standard-webhook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n",
		"SameName": "[[source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n" +
			"[[source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n",
		"StoredSecretSameName": "[[source]]\nname = \"ota\"\n[[source]]\nname = \"ota\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, db := filepath.Join(dir, "hookdedup.toml"), filepath.Join(dir, "hookdedup.db")
			if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"serve", "--config", cfg, "--database", db},
				func(string) string { return "" }, strings.NewReader(""), &out, &errb)
			if err == nil || !strings.Contains(err.Error(), `source "ota"`) {
				t.Fatalf("serve: %v; want the source's mistake", err)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a start refused for its sources left %s behind (%v)", db, err)
			}
		})
	}
}

// TestServe_BadAddrCreatesNothing: an addr without a port is refused, naming the setting
// and its value, before serve makes the database's directory or the database.
func TestServe_BadAddrCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(cfg, []byte("addr = \"127.0.0.1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "data", "hookdedup.db")
	out, err := runCmd(t, "", "serve", "--config", cfg, "--database", dbPath)
	if err == nil {
		t.Fatalf("serve started with addr = \"127.0.0.1\"\n%s", out)
	}
	if !strings.Contains(err.Error(), `addr "127.0.0.1" is not host:port`) {
		t.Errorf("error %q does not name the setting and its value", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "data")); serr == nil {
		t.Errorf("a config error made the database's directory (and the database) before it was reported: %v", err)
	}
}

// TestServe_BadListenPortCreatesNothing: a port that listening would refuse (past 65535,
// or a name the system has no service of) is refused, in each of the three listen
// addresses, naming the setting and its value, before serve makes the database's
// directory or the database. A service name the system knows is a port.
func TestServe_BadListenPortCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		want       string
	}{
		{"AddrOutOfRange", "addr = \"127.0.0.1:99999\"\n", nil, `addr "127.0.0.1:99999": port 99999 is out of range`},
		{"AddrUnknownName", "addr = \"127.0.0.1:http-alt-nonexistent\"\n", nil, `addr "127.0.0.1:http-alt-nonexistent": port "http-alt-nonexistent" is neither a number`},
		{"AddrFromEnvironment", "", map[string]string{"HOOKDEDUP_ADDR": "127.0.0.1:65536"}, `addr "127.0.0.1:65536": port 65536 is out of range`},
		{"ConsoleAddr", "console_addr = \"127.0.0.1:70000\"\n", nil, `console_addr "127.0.0.1:70000": port 70000 is out of range`},
		{"HTTPAddr", "http_addr = \":8o\"\n", nil, `http_addr ":8o": port "8o" is neither a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "hookdedup.toml")
			if err := os.WriteFile(cfg, []byte(tc.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			err := run(ctx, []string{"serve", "--config", cfg, "--database", filepath.Join(dir, "data", "hookdedup.db")},
				func(k string) string { return tc.env[k] }, strings.NewReader(""), &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v; want an error containing %q\n%s", err, tc.want, errb.String())
			}
			if _, serr := os.Stat(filepath.Join(dir, "data")); serr == nil {
				t.Errorf("the listen address was refused only after the database was made: %v", err)
			}
		})
	}
	t.Run("ServiceName", func(t *testing.T) {
		_, _, err := runIn(t, "addr = \"127.0.0.1:http\"\nconsole_addr = \"127.0.0.1:8081\"\n", nil, "", "sources")
		if err != nil && strings.Contains(err.Error(), "port") {
			t.Errorf("a port named by its service was refused: %v", err)
		}
	})
}

// TestServe_UnusableTLSOrAddressCreatesNothing: certificate files that cannot serve (a
// missing file, a key of another certificate) and a console_addr that names addr's port
// by another name of the same interface are refused, naming the setting, before serve
// makes the database's directory or the database; a source's mistake under ACME is
// refused before the ACME cache is made there.
func TestServe_UnusableTLSOrAddressCreatesNothing(t *testing.T) {
	ca := newTestCA(t)
	certDir := t.TempDir()
	_, keyPath := ca.files(t, certDir, testDomain)
	otherCert, _ := ca.issue(t, testDomain)
	other := filepath.Join(certDir, "other.pem")
	writeFile(t, other, otherCert)
	port := freePort(t)
	for _, tc := range []struct{ name, toml, want string }{
		{"MissingCert", fmt.Sprintf("addr = \"127.0.0.1:0\"\nhttp_addr = \"127.0.0.1:0\"\ntls_cert_file = %q\ntls_key_file = %q\n",
			filepath.Join(certDir, "missing.pem"), keyPath), "tls_cert_file"},
		{"MismatchedKey", fmt.Sprintf("addr = \"127.0.0.1:0\"\nhttp_addr = \"127.0.0.1:0\"\ntls_cert_file = %q\ntls_key_file = %q\n",
			other, keyPath), "does not go with"},
		{"ConsoleAddrOnAddrsPort", fmt.Sprintf("addr = \"127.0.0.1:%d\"\nconsole_addr = \"localhost:%d\"\n", port, port), "console_addr: listen on"},
		{"SourceErrorUnderACME", "addr = \"127.0.0.1:0\"\nhttp_addr = \"127.0.0.1:0\"\nacme_domains = [\"hooks.example.com\"]\n" +
			"[[source]]\nname = \"ota\"\nsignature = \"standard-webhook\"\nsecret = \"x\"\n", `source "ota"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "hookdedup.toml")
			writeFile(t, cfg, []byte(tc.toml))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			err := run(ctx, []string{"serve", "--config", cfg, "--database", filepath.Join(dir, "data", "hookdedup.db")},
				func(string) string { return "" }, strings.NewReader(""), &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v; want an error containing %q\n%s", err, tc.want, errb.String())
			}
			if _, serr := os.Stat(filepath.Join(dir, "data")); serr == nil {
				t.Errorf("refused (%v) only after the database was made", err)
			}
		})
	}
}

// TestConfig_SettingOfAnotherSchemeRefused: a signature setting that the source's scheme
// does not read (tolerance on github, which signs no timestamp; signature_header or
// basic_user on github; token_query on shopify) is refused, naming the setting and the
// scheme; on a scheme that reads it, it is accepted.
func TestConfig_SettingOfAnotherSchemeRefused(t *testing.T) {
	for _, tc := range []struct{ name, scheme, extra, want string }{
		{"ToleranceOnGitHub", "github", `tolerance = "1m"`, `tolerance: signature "github" signs no timestamp`},
		{"SignatureHeaderOnGitHub", "github", `signature_header = "X-Signature"`, `signature_header: signature "github" does not read it (only hmac-sha256 does)`},
		{"BasicUserOnGitHub", "github", `basic_user = "bob"`, `basic_user: signature "github" does not read it`},
		{"TokenQueryOnShopify", "shopify", `token_query = "t"`, `token_query: signature "shopify" does not read it (only token does)`},
		{"ToleranceOnStripe", "stripe", `tolerance = "1m"`, ""},
		{"BasicUserOnBasicAuth", "basic-auth", "basic_user = \"bob\"\nevent_id = \"/id\"", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte("[[source]]\nname = \"s\"\nsignature = \""+tc.scheme+"\"\nsecret = \"s3cr3t-s3cr3t\"\n"+tc.extra+"\n"))
			getenv := func(string) string { return "" }
			cfg, err := loadConfig(path, true, getenv)
			if err == nil {
				_, err = cfg.sources(getenv, func(string) (string, error) { return "", nil })
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s on %s: %v; want it accepted", tc.extra, tc.scheme, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s on %s: %v; want an error containing %q", tc.extra, tc.scheme, err, tc.want)
			}
		})
	}
}

// TestConfig_UnquotedSecretNotShown: a secret written without its quotes stops start-up
// with an error that does not quote what the decoder found there, which is the secret.
func TestConfig_UnquotedSecretNotShown(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookdedup.toml")
	const secret = "deadbeefcafebabe0123456789abcdef"
	body := "[[source]]\nname = \"gh\"\nsignature = \"github\"\nsecret = " + secret + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "", "sources", "--config", cfg, "--database", filepath.Join(dir, "h.db"))
	if err == nil {
		t.Fatalf("an unquoted secret was accepted\n%s", out)
	}
	if strings.Contains(err.Error(), secret[:8]) || strings.Contains(out, secret[:8]) {
		t.Errorf("the error shows part of the secret: %v\n%s", err, out)
	}
}

// TestConfig_ApprovalThresholdNotATable: approval_threshold written as anything but a
// table of amounts per currency is refused; decoded, it would be no threshold at all, and
// no bulk reprocess would wait for a second pair of eyes.
func TestConfig_ApprovalThresholdNotATable(t *testing.T) {
	for _, v := range []string{`"1000.00"`, `5`, `true`, `["EUR"]`} {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte("approval_threshold = "+v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, true, func(string) string { return "" })
		if err == nil {
			t.Errorf("approval_threshold = %s: accepted, thresholds %v (four-eyes approval off)", v, cfg.ApprovalThreshold)
		}
	}
}

// TestConfig_SingleBracketTableList: [source] written for [[source]] is refused with an
// error that says how to write it, not in Go's types.
func TestConfig_SingleBracketTableList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	body := "[source]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(path, true, func(string) string { return "" })
	if err == nil {
		t.Fatal("[source] accepted")
	}
	if !strings.Contains(err.Error(), "[[source]]") || strings.Contains(err.Error(), "map[string]any") {
		t.Errorf("error %q: want one that says to write [[source]], without Go type names", err)
	}
}

// TestConfig_TrustedProxiesNotEveryone: a trusted proxy range that covers every address
// is refused: every client could then name its own address in X-Forwarded-For, a new
// one for each guess at a password. So are ranges wider than any network of proxies,
// which together do the same, and an IPv4-mapped range is read as the IPv4 range it is.
func TestConfig_TrustedProxiesNotEveryone(t *testing.T) {
	load := func(list string) (config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte(`trusted_proxies = [`+list+`]`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return loadConfig(path, true, func(string) string { return "" })
	}
	for _, list := range []string{`"0.0.0.0/0"`, `"::/0"`, `"0.0.0.0/1", "128.0.0.0/1"`, `"::/1", "8000::/1"`,
		`"10.0.0.0/7"`, `"::ffff:0.0.0.0/96"`, `"::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"`} {
		if _, err := load(list); err == nil || !strings.Contains(err.Error(), "could name its own address") {
			t.Errorf("trusted_proxies = [%s]: %v; want it refused: every client in it may pick its address", list, err)
		}
	}
	cfg, err := load(`"10.0.0.0/8", "fc00::/7", "::ffff:192.168.1.0/120"`)
	if err != nil {
		t.Fatalf("the widest private networks refused: %v", err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("192.168.1.0/24")}
	if !slices.Equal(cfg.TrustedProxies, want) {
		t.Errorf("trusted proxies %v, want %v", cfg.TrustedProxies, want)
	}
}

// TestConfig_DatabaseTilde: a database path that begins with ~ is refused, saying to
// write the whole path: nothing expands it, and it would name a directory called "~".
func TestConfig_DatabaseTilde(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(path, []byte("database = \"~/hd/hookdedup.db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "", "keys", "--config", path)
	if err == nil || !strings.Contains(err.Error(), `database "~/hd/hookdedup.db": ~ is not expanded here`) {
		t.Errorf("database = \"~/hd/hookdedup.db\": %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "~")); err == nil {
		t.Error(`a directory named "~" was made`)
	}
}

// TestConfig_DatabaseMeantForAServer: a PostgreSQL connection string in libpq's keyword
// form, a postgres URL with its // mistyped, or a URL of another scheme is refused,
// naming the setting and never showing the value (it holds the password), and nothing
// is made where hookdedup runs: taken for a file's path, it became a SQLite database
// named after it, and each replica given it deduplicated alone.
func TestConfig_DatabaseMeantForAServer(t *testing.T) {
	for _, c := range []struct{ database, want string }{
		{"host=127.0.0.1 port=1 user=hook password=S3CRETPW dbname=hook", "keyword form"},
		{"dbname=hook password=S3CRETPW", "keyword form"},
		{"postgres:/hook:S3CRETPW@127.0.0.1:1/hook", "postgres: URL without its //"},
		{"PostgreSQL:hook:S3CRETPW@db/hook", "postgresql: URL without its //"},
		{"mysql://hook:S3CRETPW@127.0.0.1/hook", "a mysql:// URL"},
		{" postgres://hook:S3CRETPW@127.0.0.1:1/hook", "begins or ends with a blank"},
		{"\tpostgresql://hook:S3CRETPW@127.0.0.1:1/hook", "begins or ends with a blank"},
		{"hook:S3CRETPW@127.0.0.1:1/hook", "USER:PASSWORD@HOST without its scheme"},
	} {
		dir := t.TempDir()
		t.Chdir(dir) // where a file named after it would be made
		path := filepath.Join(dir, "hookdedup.toml")
		if err := os.WriteFile(path, []byte("database = "+strconv.Quote(c.database)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"keys", "--config", path}, {"serve", "--addr", "127.0.0.1:0", "--database", c.database}} {
			// Bounded: a serve that took it for a file would serve until stopped.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var outb bytes.Buffer
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &outb, &outb)
			cancel()
			out := outb.String()
			if err == nil || !strings.Contains(err.Error(), "database: ") || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "postgres://USER:PASSWORD@HOST:5432/DBNAME") {
				t.Errorf("%s with database %q: %v; want it refused, saying it is %s and how to write the URL", args[0], c.database, err, c.want)
			}
			if strings.Contains(fmt.Sprint(err)+out, "S3CRETPW") {
				t.Errorf("%s with database %q shows the password: %v\n%s", args[0], c.database, err, out)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("database %q: %d entries in its directory, want the configuration alone", c.database, len(entries))
		}
	}
	// A file whose name only looks like it, or a path with a colon, is still a file.
	for _, name := range []string{"user-data.db", "host_2.db", "a:b.db", "a@b.db", "x:y/a@b.db"} {
		cfg := config{Database: filepath.Join(t.TempDir(), name)}
		if err := cfg.checkDatabase(); err != nil {
			t.Errorf("database %q: %v, want it taken as a file", cfg.Database, err)
		}
	}
}

// TestConfig_SharedSecretFile: a configuration file that holds a secret and that other
// users can read is warned of, naming it and its mode; a private one, or a shared one
// that holds no secret, is not.
func TestConfig_SharedSecretFile(t *testing.T) {
	const withSecret = "[[source]]\nname = \"ota\"\nsignature = \"github\"\nsecret = \"s3cr3t-value\"\n"
	for _, c := range []struct {
		name, toml string
		mode       os.FileMode
		warn       bool
	}{
		{"SharedWithSecret", withSecret, 0o644, true},
		{"GroupWithSecret", withSecret, 0o640, true},
		{"PrivateWithSecret", withSecret, 0o600, false},
		{"SharedWithoutSecret", "retention = \"240h\"\n", 0o644, false},
		// A slack channel's URL is its credential whole, however short its token.
		{"SharedWithSlackURL", "[[alert_channel]]\nname = \"chat\"\ntype = \"slack\"\nurl = \"https://chat.hotel.example/hooks/s3cr3t\"\n", 0o644, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			if err := os.WriteFile(path, []byte(c.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path, true, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.sharedSecretFile()
			want := fmt.Sprintf("the configuration file %s (%#o) holds secrets and can be read by other users of this machine: make it private with chmod 600", path, uint32(c.mode))
			if c.warn && got != want || !c.warn && got != "" {
				t.Errorf("warning %q, want %v", got, c.warn)
			}
			if strings.Contains(got, "s3cr3t") {
				t.Errorf("the warning shows the secret: %s", got)
			}
		})
	}
}

// TestConfig_SharedSecretFileEnv: secrets the environment holds (secret_env,
// HOOKDEDUP_METRICS_TOKEN) are not the file's, which is not warned of for them.
func TestConfig_SharedSecretFileEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	toml := "[[source]]\nname = \"ota\"\nsignature = \"github\"\nsecret_env = \"OTA_SECRET\"\n"
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OTA_SECRET": "s3cr3t-value", "HOOKDEDUP_METRICS_TOKEN": "0123456789abcdef0123"}
	cfg, err := loadConfig(path, true, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.sharedSecretFile(); w != "" {
		t.Errorf("warning %q for secrets the environment holds", w)
	}
}

// TestConfig_SharedFileWithCredentials: a shared configuration file whose database URL
// holds a password, or whose forward_url holds what the console masks, is warned of.
func TestConfig_SharedFileWithCredentials(t *testing.T) {
	for _, body := range []string{
		"[[source]]\nname = \"ota\"\nsignature = \"none\"\nforward_url = \"https://down.example/hook?token=s3cretPassw0rd\"\n",
		"[[source]]\nname = \"ota\"\nsignature = \"none\"\nforward_url = \"https://user:s3cretPassw0rd@down.example/hook\"\n",
	} {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, true, func(string) string { return "" })
		if err != nil {
			t.Logf("refused (%q): %v", body, err)
			continue
		}
		if cfg.sharedSecretFile() == "" {
			t.Errorf("a 0644 configuration file holding a credential gives no warning:\n%s", body)
		}
	}
}

// TestConfig_SharedFileWithDatabasePassword: a shared configuration file whose
// PostgreSQL URL holds a password is warned of wherever the URL holds it: in its user
// part, or as a query parameter that pgx takes a secret from (password, and sslpassword,
// the client key's), in any case, with several hosts too. A URL that holds none (the
// password from PGPASSWORD or ~/.pgpass) is not warned of.
func TestConfig_SharedFileWithDatabasePassword(t *testing.T) {
	for _, c := range []struct {
		url  string
		warn bool
	}{
		{"postgres://hookdedup:s3cretPassw0rd@db.internal/hookdedup", true},
		{"postgres://hookdedup@db.internal:5432/hookdedup?password=s3cretPassw0rd", true},
		{"postgresql://hookdedup@db.internal/hookdedup?sslmode=verify-full&sslpassword=s3cretPassw0rd", true},
		{"postgres://hookdedup@db.internal/hookdedup?sslmode=verify-full&Password=s3cretPassw0rd", true},
		{"postgres://hookdedup:s3cretPassw0rd@db1.internal:5432,db2.internal:5432/hookdedup?target_session_attrs=read-write", true},
		{"postgres://hookdedup@db1.internal:5432,db2.internal:5432/hookdedup?target_session_attrs=read-write&password=s3cretPassw0rd", true},
		{"postgres://hookdedup@db.internal/hookdedup?sslmode=verify-full&sslkey=/etc/hookdedup/client.key", false},
		{"postgres://hookdedup@db1.internal:5432,db2.internal:5432/hookdedup?target_session_attrs=read-write", false},
	} {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte("database = \""+c.url+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, true, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: refused: %v", c.url, err)
		}
		if w := cfg.sharedSecretFile(); (w != "") != c.warn {
			t.Errorf("a 0644 configuration file with database = %q: warning %q, want one: %v", c.url, w, c.warn)
		}
	}
}

// TestConfig_DatabaseAndLogSettingsNameTheirOrigin: synchronous, cache_size and log_level
// are refused as the setting is read, like every other setting, so that the error names
// the file, the variable or the flag that set it, every command refuses them alike, and
// serve creates no database first.
func TestConfig_DatabaseAndLogSettingsNameTheirOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		args       []string
		want       string
	}{
		{"SynchronousFile", "synchronous = \"OFF\"\n", nil, nil, `hookdedup.toml: synchronous: "OFF" is not FULL or NORMAL`},
		{"SynchronousEnvironment", "", map[string]string{"HOOKDEDUP_SYNCHRONOUS": "OFF"}, nil, `HOOKDEDUP_SYNCHRONOUS: "OFF" is not FULL or NORMAL`},
		{"SynchronousFlag", "", nil, []string{"--synchronous", "OFF"}, `--synchronous: "OFF" is not FULL or NORMAL`},
		{"CacheSizeFile", "cache_size = 10\n", nil, nil, "hookdedup.toml: cache_size: 10 is not a number of bytes from 1024 to 2199023255552"},
		{"CacheSizeTooLargeFile", "cache_size = 2199023255553\n", nil, nil, "hookdedup.toml: cache_size: 2199023255553 is not a number of bytes"},
		{"CacheSizeEnvironment", "", map[string]string{"HOOKDEDUP_CACHE_SIZE": "10"}, nil, "HOOKDEDUP_CACHE_SIZE: 10 is not a number of bytes from 1024"},
		{"CacheSizeFlag", "", nil, []string{"--cache-size", "10"}, "--cache-size: 10 is not a number of bytes from 1024"},
		{"LogLevelFile", "log_level = \"trace\"\n", nil, nil, `hookdedup.toml: log_level: "trace" is not one of debug, info, warn, error`},
		{"LogLevelEnvironment", "", map[string]string{"HOOKDEDUP_LOG_LEVEL": "trace"}, nil, `HOOKDEDUP_LOG_LEVEL: "trace" is not one of debug, info, warn, error`},
		{"LogLevelFlag", "", nil, []string{"--log-level", "trace"}, `--log-level: "trace" is not one of debug, info, warn, error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"keys"}, {"sources"}} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _, err := runInContext(t, ctx, tc.toml, tc.env, "", append(cmd, tc.args...)...)
				cancel()
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v; want an error containing %q", cmd[0], err, tc.want)
				}
			}
		})
	}
	// What they accept is unchanged: SQLite's words in any case, slog's levels.
	for _, tc := range []struct{ name, toml string }{
		{"SynchronousLowerCase", "synchronous = \"normal\"\n"},
		{"CacheSizeBounds", "cache_size = 1024\n"},
		{"LogLevelUpperCase", "log_level = \"WARN\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := runIn(t, tc.toml, nil, "", "sources"); err != nil && !strings.Contains(err.Error(), "no database") {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// loadWith loads the configuration as a command does, from a file holding toml (none
// when toml is ""), the variables vars and the flags args.
func loadWith(t *testing.T, toml string, vars map[string]string, args ...string) (config, error) {
	t.Helper()
	full := append([]string{}, args...)
	if toml != "" {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		writeFile(t, path, []byte(toml))
		full = append(full, "--config", path)
	}
	getenv := func(k string) string { return vars[k] }
	f := newFlags("serve", env{getenv: getenv, stderr: &bytes.Buffer{}})
	if _, err := f.parse(full); err != nil {
		t.Fatal(err)
	}
	return f.load(env{getenv: getenv, stderr: &bytes.Buffer{}})
}

// TestConfig_FlagWinsOverInvalidVariable: a flag overrides its HOOKDEDUP_* variable even
// when the variable's value would be refused: passing the flag is how an operator works
// around an environment they do not control (a unit, a container image), and the
// variable is not read for that setting at all.
func TestConfig_FlagWinsOverInvalidVariable(t *testing.T) {
	for _, tc := range []struct {
		name, env, flag, value string
		got                    func(config) string
	}{
		{"LogLevel", "HOOKDEDUP_LOG_LEVEL", "--log-level", "warn", func(c config) string { return c.LogLevel }},
		{"StuckAfter", "HOOKDEDUP_STUCK_AFTER", "--stuck-after", "15m0s", func(c config) string { return c.StuckAfter.String() }},
		{"MaxBody", "HOOKDEDUP_MAX_BODY", "--max-body", "2048", func(c config) string { return strconv.FormatInt(c.MaxBody, 10) }},
		{"ACMEDomains", "HOOKDEDUP_ACME_DOMAINS", "--acme-domains", "hooks.example.com", func(c config) string { return strings.Join(c.ACMEDomains, ",") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadWith(t, "addr = \"127.0.0.1:1111\"\n", map[string]string{tc.env: " bogus "}, tc.flag, tc.value)
			if err != nil {
				t.Fatalf("%s set wrongly, with %s %s: %v; want the flag to win", tc.env, tc.flag, tc.value, err)
			}
			if got := tc.got(cfg); got != tc.value {
				t.Errorf("%s = %q, want the flag's %q", tc.flag, got, tc.value)
			}
		})
	}
	// Without the flag, the variable is still read, and refused.
	if _, err := loadWith(t, "", map[string]string{"HOOKDEDUP_LOG_LEVEL": "bogus"}); err == nil || !strings.Contains(err.Error(), "HOOKDEDUP_LOG_LEVEL:") {
		t.Errorf("HOOKDEDUP_LOG_LEVEL=bogus without --log-level: %v; want it refused", err)
	}
}

// TestConfig_CrossSettingErrorsNameTheirOrigin: a check that reads several settings
// together names where those it is about came from, as every other configuration error
// does: the file, the variable or the flag.
func TestConfig_CrossSettingErrorsNameTheirOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		args       []string
		want       string
	}{
		{"SessionIdleFile", "session_idle = \"3h\"\nsession_max = \"2h\"\n", nil, nil, "hookdedup.toml: session_idle (3h0m0s) is longer than session_max"},
		{"SessionIdleVariable", "", map[string]string{"HOOKDEDUP_SESSION_IDLE": "13h"}, nil, "HOOKDEDUP_SESSION_IDLE: session_idle (13h0m0s) is longer than session_max"},
		{"SessionMaxFlag", "session_idle = \"3h\"\n", nil, []string{"--session-max", "2h"}, "hookdedup.toml, --session-max: session_idle (3h0m0s)"},
		{"HTTPAddrWithoutHTTPS", "http_addr = \":8088\"\n", nil, nil, "hookdedup.toml: http_addr is set but HTTPS is not"},
		{"CertWithoutKeyFile", "tls_cert_file = \"a.pem\"\n", nil, nil, "hookdedup.toml: tls_cert_file is set but tls_key_file is not"},
		{"CertWithoutKeyFlag", "", nil, []string{"--tls-cert-file", "a.pem"}, "--tls-cert-file: tls_cert_file is set but tls_key_file is not"},
		{"EmailWithoutDomains", "acme_email = \"ops@example.com\"\n", nil, nil, "hookdedup.toml: acme_email is set but acme_domains is empty"},
		{"HTTPAddrIsAddr", "acme_domains = [\"hooks.example.com\"]\naddr = \":80\"\n", nil, nil, `hookdedup.toml: http_addr ":80" is the same as addr`},
		{"AddrNotHostPort", "addr = \"127.0.0.1\"\n", nil, nil, `hookdedup.toml: addr "127.0.0.1" is not host:port`},
		{"ConsoleAddrIsAddr", "console_addr = \"127.0.0.1:8080\"\n", nil, nil, `hookdedup.toml: console_addr "127.0.0.1:8080" is the same as addr`},
		{"ConsoleAddrVariable", "", map[string]string{"HOOKDEDUP_CONSOLE_ADDR": "8081"}, nil, `HOOKDEDUP_CONSOLE_ADDR: console_addr "8081" is not host:port`},
		{"DatabaseTilde", "database = \"~/hd.db\"\n", nil, nil, `hookdedup.toml: database "~/hd.db": ~ is not expanded here`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(t, tc.toml, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestConfig_SourceNames: a source's name is its URL path segment, as it is. "." and
// "..", which no delivery can reach (the path is cleaned), and a name that is not one
// segment as it is (/, ?, #, %, ;, a space, a control character, a letter beyond ASCII) stop
// every command, naming the setting. The characters one segment holds as they are have
// always loaded, and still do: each such source receives its deliveries.
func TestConfig_SourceNames(t *testing.T) {
	source := func(name string) string {
		quoted := strings.ReplaceAll(fmt.Sprintf("%q", name), `\x7f`, `\u007f`) // TOML's escape
		return "[[source]]\nname = " + quoted + "\nsignature = \"none\"\nkey_fields = [\"/a\"]\n"
	}
	for _, name := range []string{".", "..", "a/b", "a?b", "a#b", "a%41", "a b", "a\tb", "a\x7fb", "hôtel", "a;b", "a,b", "a!b", "a'b", "a(b)", "a*b"} {
		t.Run(fmt.Sprintf("Refused%q", name), func(t *testing.T) {
			_, _, err := runIn(t, source(name), nil, "", "key", "--source", name)
			if err == nil || !strings.Contains(err.Error(), "hookdedup.toml: source ") || !strings.Contains(err.Error(), ": name: ") {
				t.Errorf("source name %q: %v; want it refused, naming the file and the setting", name, err)
			}
		})
	}
	accepted := []string{"ota", "OTA-2", "a.b", "a_b-c", "a:b", "a@b", "a+b", "a=b", "a~b", "a$b", "a&b", "..a", ".a", "..."}
	var toml strings.Builder
	for _, name := range accepted {
		toml.WriteString(source(name))
	}
	s := runServeInProcess(t, toml.String(), nil, "--addr", "127.0.0.1:0")
	for _, name := range accepted {
		resp, body := call(t, "POST", s.p.public.url()+"/webhooks/"+name, "", `{"a":1}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"accepted"`) {
			t.Errorf("POST /webhooks/%s: %d %s; want it accepted", name, resp.StatusCode, body)
		}
	}
}

// TestConfig_HTTPSErrorNamesWhereItsSettingWasSet: an error of one HTTPS setting is
// prefixed with where that setting was set, not where every HTTPS setting set was: the
// file names the domains, a flag gives a bad acme_email, and the error names the flag
// alone, not a file that holds no acme_email.
func TestConfig_HTTPSErrorNamesWhereItsSettingWasSet(t *testing.T) {
	_, err := loadWith(t, "acme_domains = [\"hooks.example.com\"]\n", nil, "--acme-email", "not-an-address")
	if err == nil {
		t.Fatal("a bad acme_email was accepted")
	}
	if want := "--acme-email: acme_email"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("%v\nwant it to begin %q: only the flag set acme_email", err, want)
	}
}

// TestConfig_DatabaseNUL: a database path with a NUL byte (\u0000 in the file) is
// refused before anything is opened, naming the setting and showing the byte escaped,
// rather than failing at the open with "invalid argument" under a name printed raw.
func TestConfig_DatabaseNUL(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(cfg, []byte("database = \"a\\u0000b.db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"keys"}, {"user", "add", "alice", "--role", "admin"}, {"serve"}} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--config", cfg), func(string) string { return "" },
			strings.NewReader("a-long-enough-password\n"), &out, &out)
		if err == nil || !strings.Contains(err.Error(), `database "a\x00b.db": holds a NUL byte`) || !strings.Contains(err.Error(), "hookdedup.toml") {
			t.Errorf("%s with a NUL in database: %v, want it refused naming the setting, its file and the byte", args[0], err)
		}
		if strings.ContainsRune(fmt.Sprint(err)+out.String(), 0) {
			t.Errorf("%s prints a NUL byte: %q\n%q", args[0], err, out.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries in the directory, want the configuration alone", len(entries))
	}
}

// TestConfig_DatabaseInMemory: database ":memory:" is refused by every command before
// anything is opened or made, saying that it is SQLite's in-memory database: user add
// said it added a user that no other command could find, and serve failed on "no such
// table".
func TestConfig_DatabaseInMemory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{{"keys"}, {"user", "add", "alice", "--role", "admin"}, {"serve", "--addr", "127.0.0.1:0"}, {"backup", "copy.db"}} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--database", ":memory:"), func(string) string { return "" },
			strings.NewReader("a-long-enough-password\n"), &out, &out)
		if err == nil || !strings.Contains(err.Error(), "database :memory: is SQLite's in-memory database") {
			t.Errorf("%s --database :memory:: %v, want it refused as SQLite's in-memory database", args[0], err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d entries in the directory, want none", len(entries))
	}
}

// TestConfig_DatabaseDirectory: a database that names a directory (the one meant to
// hold it) is refused by every command, saying so and naming a file in it, rather than
// failing on SQLite's "disk I/O error" blamed on the backup, or "unable to open"; and a
// restore from a directory says the backup is one.
func TestConfig_DatabaseDirectory(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"keys"}, {"serve"}, {"user", "add", "alice", "--role", "admin"}, {"backup", filepath.Join(dir, "b.db")},
		{"migrate", "--to", "postgres://hook:pw@127.0.0.1:1/hook"}, {"restore", filepath.Join(dir, "b.db")}, {"audit", "verify"}} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--database", state), func(string) string { return "" },
			strings.NewReader("a-long-enough-password\n"), &out, &out)
		if want := state + " is a directory: name the database file, such as " + filepath.Join(state, "hookdedup.db"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with --database a directory: %v, want %q", args[0], err, want)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("%d entries made in the directory, want none", len(entries))
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"restore", "--database", filepath.Join(dir, "hookdedup.db"), state}, func(string) string { return "" },
		strings.NewReader(""), &out, &out)
	if err == nil || !strings.Contains(err.Error(), state+" is a directory: give the backup's file") {
		t.Errorf("restore from a directory: %v, want it said that the backup named is a directory", err)
	}
}

// TestConfig_EmptyConfigOrDatabaseFlag: --config "$F" or --database "$F" with the
// variable unset is refused, naming the flag and the likely cause, rather than failing
// on a file named "" (": open : no such file or directory", "empty path").
func TestConfig_EmptyConfigOrDatabaseFlag(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "--config", ""}, "--config is empty (an unset variable?)"},
		{[]string{"user", "list", "--config", ""}, "--config is empty (an unset variable?)"},
		{[]string{"keys", "--database", ""}, "--database"},
		{[]string{"backup", "--database", "", "b.db"}, "--database"},
		{[]string{"serve", "--database", ""}, "--database"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), c.args, func(string) string { return "" }, strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "empty (an unset variable?)") {
			t.Errorf("%q: %v, want it refused saying %s is empty", c.args, err, c.want)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("%d files made, want none", len(entries))
	}
	// In the file, an empty database is the default, as it always was.
	if err := os.WriteFile("hookdedup.toml", []byte("database = \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"keys"}, func(string) string { return "" }, strings.NewReader(""), &out, &out)
	if !errors.Is(err, storage.ErrNoDatabase) {
		t.Errorf("keys with database = \"\" in the file: %v, want no database at the default path", err)
	}
}

// TestConfig_WritableByOthers: a configuration file that other users can write is
// warned of, whatever it holds, naming it and its mode: they could change forward_url
// or put in a secret of their own. One only its owner writes is not.
func TestConfig_WritableByOthers(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o666, true}, {0o664, true}, {0o620, true}, {0o644, false}, {0o600, false}} {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte("retention = \"240h\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, true, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.writableFile()
		want := fmt.Sprintf("the configuration file %s (%#o) can be changed by other users of this machine", path, uint32(c.mode))
		if c.warn && !strings.HasPrefix(got, want) || !c.warn && got != "" {
			t.Errorf("mode %#o: warning %q, want one: %v", uint32(c.mode), got, c.warn)
		}
	}
}

// TestConfig_BatchErrorSaysWhereEventIDCameFrom: a batched source keyed on a header that
// its scheme or preset chose is refused saying so, and an error of another setting of
// such a source says nothing of event_id.
func TestConfig_BatchErrorSaysWhereEventIDCameFrom(t *testing.T) {
	const source = `
[[source]]
name = "gh"
signature = "github"
secret = "x"
batch = `
	_, _, err := runIn(t, source+`"/events"`, nil, "", "key", "--source", "gh")
	if err == nil || !strings.Contains(err.Error(), `signature "github" reads the event id there unless event_id is set`) {
		t.Errorf("keyed on the scheme's header: %v, want it to say the scheme chose it", err)
	}
	_, _, err = runIn(t, source+`"events"`, nil, "", "key", "--source", "gh")
	if err == nil || !strings.Contains(err.Error(), `batch: "events"`) || strings.Contains(err.Error(), "event id") {
		t.Errorf("a batch that is no pointer: %v, want it named, and no word of the event id", err)
	}
}

// TestConfig_BatchOfTheWholeBody: batch = "#" takes a body that is itself the array of
// events; the key command splits it as intake does.
func TestConfig_BatchOfTheWholeBody(t *testing.T) {
	const source = `
[[source]]
name = "mail"
signature = "none"
event_id = "/sg_event_id"
batch = "#"
`
	dir := t.TempDir()
	file := filepath.Join(dir, "events.json")
	if err := os.WriteFile(file, []byte(`[{"sg_event_id":"e1"},{"sg_event_id":"e2"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := keyWith(t, dir, source, "", "--source", "mail", file)
	if err != nil {
		t.Fatalf("key of a whole-body batch: %v", err)
	}
	for _, want := range []string{"2 items at # (the whole body)", "item 0", "item 1", "e1", "e2"} {
		if !strings.Contains(out, want) {
			t.Errorf("key of a whole-body batch does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "envelope") {
		t.Errorf("key of a whole-body batch names an envelope, which it has none of:\n%s", out)
	}
}
