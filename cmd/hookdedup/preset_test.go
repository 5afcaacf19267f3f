package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
)

const adyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

// loadSources reads toml as the config file and builds its sources; the environment
// holds env.
func loadSources(t *testing.T, toml string, env map[string]string) (config, []receiver.Source, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := loadConfig(path, true, getenv)
	if err != nil {
		return cfg, nil, err
	}
	sources, err := cfg.sources(getenv, func(string) (string, error) { return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", nil })
	return cfg, sources, err
}

func TestConfig_Provider(t *testing.T) {
	cfg, sources, err := loadSources(t, `
[[source]]
name     = "payments"
provider = "adyen"
secret   = "`+adyenKey+`"
ttl      = "2160h"
booking_field = ""
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := sources[0]
	// From the preset.
	if src.Verifier.Scheme() != "adyen" || src.Batch != "/notificationItems" || src.Item != "/NotificationRequestItem" ||
		src.CurrencyField != "/amount/currency" || !src.AmountMinorUnits || src.Answer != receiver.AnswerAccepted ||
		!slices.Equal(src.Keys.KeyFields, []string{"/merchantAccountCode", "/pspReference", "/eventCode", "/success"}) ||
		len(src.Keys.EventID) != 0 || src.PropertyField != "/merchantAccountCode" {
		t.Errorf("preset settings not applied: %+v", src)
	}
	// The file's own, over the preset's.
	if src.TTL != 2160*time.Hour || src.BookingField != "" {
		t.Errorf("ttl %s, booking_field %q: want the file's 2160h and \"\"", src.TTL, src.BookingField)
	}
	// And which came from where.
	s, err := cfg.Sources[0].settle()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"signature", "key_fields", "batch", "item", "amount_field", "currency_field", "amount_minor_units", "answer"} {
		if !slices.Contains(s.fromPreset, name) {
			t.Errorf("%s not recorded as from the preset: %v", name, s.fromPreset)
		}
	}
	for _, name := range []string{"ttl", "booking_field", "form_encoded"} {
		if slices.Contains(s.fromPreset, name) {
			t.Errorf("%s recorded as from the preset: %v", name, s.fromPreset)
		}
	}
}

// Every preset makes a source that the config's own checks accept, with a secret of
// the scheme's shape.
func TestConfig_EveryProvider(t *testing.T) {
	for _, name := range provider.Names() {
		p, _ := provider.Lookup(name)
		secret := "a-long-random-shared-token"
		switch p.Signature {
		case "adyen":
			secret = adyenKey
		case "standard-webhooks":
			secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		}
		_, sources, err := loadSources(t, `
[[source]]
name     = "`+name+`"
provider = "`+name+`"
secret   = "`+secret+`"
`, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := sources[0]; got.Verifier.Scheme() != p.Signature || got.TTL != p.TTL || got.Batch != p.Batch {
			t.Errorf("%s: scheme %s ttl %s batch %q; preset %s %s %q", name, got.Verifier.Scheme(), got.TTL, got.Batch,
				p.Signature, p.TTL, p.Batch)
		}
	}
}

func TestConfig_ProviderErrors(t *testing.T) {
	for _, c := range []struct{ name, table, want string }{
		{"Unknown", `provider = "adyn"`, `source "s": provider: "adyn" is not a known provider (want one of adyen, apaleo, beds24, channex, cloudbeds, github, guesty, mews, shopify, stripe)`},
		{"Empty", `provider = ""`, `signature: is required`}, // no preset: as if provider were left out
		{"ItemWithoutBatch", `signature = "github"` + "\n" + `item = "/event"`, `item: "/event" is set without batch`},
		{"FormBatch", `signature = "github"` + "\n" + `form_encoded = true` + "\n" + `batch = "/events"`,
			`form_encoded: a batched source (batch "/events") reads its events from a JSON body, not from a form's payload field`},
		{"BatchNotAPointer", `signature = "github"` + "\n" + `batch = "events"`, `batch: "events" is not a JSON pointer`},
		{"CurrencyNotAPointer", `signature = "github"` + "\n" + `currency_field = "currency"`, `currency_field: "currency" is not a JSON pointer`},
		{"AmountNotAPointer", `signature = "github"` + "\n" + `amount_field = ["/refund/amount", "amount"]`, `amount_field[1]: "amount" is not a JSON pointer`},
		// Read only beside an amount: without one they would qualify nothing.
		{"CurrencyWithoutAmount", `signature = "github"` + "\n" + `currency_field = "/currency"`, `currency_field: "/currency" is set without amount_field`},
		{"MinorUnitsWithoutAmount", `signature = "github"` + "\n" + `amount_minor_units = true`, `amount_minor_units: is set without amount_field`},
		// A preset's amount, turned off by the source: its currency goes unread with it.
		{"PresetAmountOff", `provider = "stripe"` + "\n" + `amount_field = []`, ``},
		{"AmountQualifier", `signature = "github"` + "\n" + `amount_field = "/amount_refunded when /type"`, `amount_field "/amount_refunded when /type": write the qualifier as`},
		{"AmountNumber", `signature = "github"` + "\n" + `amount_field = 5`, `amount_field is a number: write a string, or an array of strings`},
		{"Answer", `signature = "github"` + "\n" + `answer = "ok"`, `answer: "ok" is not an answer hookdedup gives (want "json" or "[accepted]")`},
		// A preset's batch, turned off by the source: item is not the preset's either.
		{"BatchOff", `provider = "adyen"` + "\n" + `batch = ""` + "\n" + `key_fields = ["/pspReference"]`, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := "x"
			if strings.Contains(c.table, "adyen") {
				secret = adyenKey
			}
			_, sources, err := loadSources(t, "[[source]]\nname = \"s\"\nsecret = \""+secret+"\"\nevent_id = \"/id\"\n"+c.table+"\n", nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && c.name == "BatchOff" && (sources[0].Batch != "" || sources[0].Item != ""):
				t.Errorf("batch %q item %q, want none", sources[0].Batch, sources[0].Item)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want it to say %s", err, c.want)
			}
		})
	}
}

// The explicit setting wins over the preset, and a setting the preset has no value for
// keeps hookdedup's default.
func TestConfig_ProviderOverrides(t *testing.T) {
	_, sources, err := loadSources(t, `
[[source]]
name       = "stripe"
provider   = "stripe"
secret_env = "STRIPE_SECRET"
event_id   = "/data/object/id"
amount_minor_units = false
forward_url = "http://127.0.0.1:9/events"
`, map[string]string{"STRIPE_SECRET": "whsec_test_secret"})
	if err != nil {
		t.Fatal(err)
	}
	src := sources[0]
	if !slices.Equal(src.Keys.EventID, []string{"/data/object/id"}) || src.AmountMinorUnits || !slices.Equal(src.AmountField, []string{"/data/object/refunds/data/0/amount when /type = charge.refunded", "/data/object/amount_refunded when /type = charge.refunded", "/data/object/amount"}) {
		t.Errorf("event_id %q, amount_minor_units %v, amount_field %q", src.Keys.EventID, src.AmountMinorUnits, src.AmountField)
	}
	if src.BookingField != "" || src.PropertyField != "" {
		t.Errorf("labels %q %q: the preset leaves them off for Stripe, not hookdedup's defaults", src.PropertyField, src.BookingField)
	}
	if src.MaxAttempts != 10 || src.Answer != receiver.AnswerJSON || src.FormEncoded {
		t.Errorf("defaults: max_attempts %d, answer %q, form_encoded %v", src.MaxAttempts, src.Answer, src.FormEncoded)
	}
}

// A source that turns its preset's batch off keeps the preset's key, read inside each
// event of a batch: on the whole request it finds nothing, and every genuine delivery
// would be refused 422. It starts only with a key of its own for the whole request.
func TestConfig_ProviderBatchOffNeedsOwnKey(t *testing.T) {
	for _, c := range []struct{ name, table, want string }{
		{"Adyen", `provider = "adyen"` + "\n" + `batch = ""`,
			`batch: "" turns off provider "adyen"'s batch ("/notificationItems"), yet the key is still the preset's, read inside each event (key_fields "/merchantAccountCode", "/pspReference", "/eventCode", "/success"): on the whole request it finds nothing, and every delivery would be refused 422; set key_fields or event_id to where the request holds its key, or leave batch out`},
		{"Mews", `provider = "mews"` + "\n" + `batch = ""`,
			`batch: "" turns off provider "mews"'s batch ("/Events"), yet the key is still the preset's, read inside each event (key_fields "/Discriminator", "/Value")`},
		{"EventIDNone", `provider = "mews"` + "\n" + `batch = ""` + "\n" + `event_id = ""`, `batch: "" turns off provider "mews"'s batch`},
		{"OwnKeyFields", `provider = "adyen"` + "\n" + `batch = ""` + "\n" + `key_fields = ["/notificationItems/0/NotificationRequestItem/pspReference"]`, ``},
		{"OwnEventID", `provider = "mews"` + "\n" + `batch = ""` + "\n" + `event_id = "/Events/0/Value"`, ``},
		{"PresetsOwnBatch", `provider = "mews"` + "\n" + `batch = "/Events"`, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := "x"
			if strings.Contains(c.table, "adyen") {
				secret = adyenKey
			}
			_, sources, err := loadSources(t, "[[source]]\nname = \"s\"\nsecret = \""+secret+"\"\n"+c.table+"\n", nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && c.name != "PresetsOwnBatch" && sources[0].Batch != "":
				t.Errorf("batch %q, want none", sources[0].Batch)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want it to say %s", err, c.want)
			}
		})
	}
}
