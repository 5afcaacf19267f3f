package provider_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
)

func ptr[T any](v T) *T { return &v }

// setNames lists the config names of the non-nil fields of s, in field
// order, read from the struct tags.
func setNames(s provider.Settings) []string {
	var names []string
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			names = append(names, v.Type().Field(i).Tag.Get("toml"))
		}
	}
	return names
}

func TestApply_FillsUnsetSettings(t *testing.T) {
	for _, name := range provider.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := provider.Lookup(name)
			var s provider.Settings
			filled := p.Apply(&s)
			if got := setNames(s); !slices.Equal(filled, got) {
				t.Errorf("Apply reported %v, but set %v", filled, got)
			}
			// The filled settings say what the preset says.
			if *s.Signature != p.Signature || !slices.Equal(*s.EventID, p.EventID) || *s.PropertyField != p.PropertyField {
				t.Errorf("signature %q, event_id %q, property_field %q; preset %q, %q, %q",
					*s.Signature, *s.EventID, *s.PropertyField, p.Signature, p.EventID, p.PropertyField)
			}
			ttl, err := time.ParseDuration(*s.TTL)
			if err != nil || ttl != p.TTL {
				t.Errorf("ttl %q (%v), want %v", *s.TTL, err, p.TTL)
			}
			if len(p.KeyFields) > 0 && !slices.Equal(*s.KeyFields, p.KeyFields) {
				t.Errorf("key_fields %v, want %v", *s.KeyFields, p.KeyFields)
			}
			// Always filled, so generic defaults do not apply to this sender.
			for _, always := range []string{"signature", "event_id", "property_field", "booking_field", "status_field", "ttl"} {
				if !slices.Contains(filled, always) {
					t.Errorf("%s was not filled", always)
				}
			}
			// A second Apply finds nothing left to fill.
			if again := p.Apply(&s); len(again) != 0 {
				t.Errorf("a second Apply filled %v", again)
			}
		})
	}
}

// A setting the source sets itself, even to "" or an empty list, is never
// replaced.
func TestApply_ExplicitSettingsWin(t *testing.T) {
	p, _ := provider.Lookup("adyen")
	s := provider.Settings{
		EventID:       ptr(provider.EventIDs{}),
		KeyFields:     ptr([]string{}),
		PropertyField: ptr("/additionalData/hotelId"),
		AmountField:   ptr(provider.Places{}),
		TTL:           ptr("2160h"),
	}
	filled := p.Apply(&s)
	for _, own := range []string{"event_id", "key_fields", "property_field", "amount_field", "ttl"} {
		if slices.Contains(filled, own) {
			t.Errorf("Apply filled %s, which the source set", own)
		}
	}
	if len(*s.EventID) != 0 || len(*s.KeyFields) != 0 || *s.PropertyField != "/additionalData/hotelId" ||
		len(*s.AmountField) != 0 || *s.TTL != "2160h" {
		t.Errorf("the source's own settings changed: %+v", s)
	}
	// The rest still comes from the preset.
	if *s.Signature != "adyen" || *s.Batch != "/notificationItems" || *s.CurrencyField != "/amount/currency" {
		t.Errorf("preset settings missing: signature %v, batch %v, currency_field %v", s.Signature, s.Batch, s.CurrencyField)
	}
}

// A source that picks another scheme sets that scheme's settings itself:
// the preset's token settings would be meaningless, or contradict them.
func TestApply_OtherSchemeGetsNoSchemeSettings(t *testing.T) {
	p, _ := provider.Lookup("mews") // token in the query
	s := provider.Settings{Signature: ptr("basic-auth"), BasicUser: ptr("mews")}
	filled := p.Apply(&s)
	if s.TokenQuery != nil || s.TokenHeader != nil || slices.Contains(filled, "token_query") {
		t.Errorf("the preset's token settings were filled for a basic-auth source: %v", filled)
	}
	if _, err := signature.New(signature.Config{Scheme: *s.Signature, BasicUser: *s.BasicUser, Secrets: []string{"pw"}}); err != nil {
		t.Error(err)
	}
}

// token_header and token_query are one choice: a source that makes it gets
// no second one from the preset, which signature.New would refuse.
func TestApply_TokenPlaceIsOneChoice(t *testing.T) {
	p, _ := provider.Lookup("mews")
	s := provider.Settings{TokenHeader: ptr("X-Mews-Token")}
	p.Apply(&s)
	if s.TokenQuery != nil {
		t.Fatalf("token_query %q filled beside the source's token_header", *s.TokenQuery)
	}
	cfg := signature.Config{Scheme: *s.Signature, TokenHeader: *s.TokenHeader, Secrets: []string{"tok"}}
	if _, err := signature.New(cfg); err != nil {
		t.Errorf("signature.New: %v", err)
	}
}

func TestApply_ItemFollowsBatch(t *testing.T) {
	p, _ := provider.Lookup("adyen")
	s := provider.Settings{Batch: ptr("")} // one event per request
	p.Apply(&s)
	if s.Item != nil {
		t.Errorf("item %q filled for a source that set its own batch", *s.Item)
	}

	// A table that writes out the preset's own batch gets the preset's item with it.
	s = provider.Settings{Batch: ptr(p.Batch)}
	p.Apply(&s)
	if s.Item == nil || *s.Item != p.Item {
		t.Errorf("item %v for a source that repeats the preset's batch %q, want %q", s.Item, p.Batch, p.Item)
	}
}

// The shape a config reader uses: Settings embedded in the [[source]]
// table, decoded from TOML; keys the file leaves out stay nil, so Apply
// fills exactly those.
func TestApply_EmbeddedInTOML(t *testing.T) {
	type sourceConfig struct {
		Name     string `toml:"name"`
		Provider string `toml:"provider"`
		provider.Settings
		Secret string `toml:"secret"`
	}
	const file = `
[[source]]
name     = "payments"
provider = "adyen"
secret   = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
ttl      = "2160h"
booking_field = ""
`
	var cfg struct {
		Sources []sourceConfig `toml:"source"`
	}
	if _, err := toml.Decode(file, &cfg); err != nil {
		t.Fatal(err)
	}
	sc := cfg.Sources[0]
	if sc.TTL == nil || *sc.TTL != "2160h" || sc.BookingField == nil || *sc.BookingField != "" || sc.Signature != nil {
		t.Fatalf("decoded settings: ttl %v, booking_field %v, signature %v", sc.TTL, sc.BookingField, sc.Signature)
	}
	p, err := provider.Resolve(sc.Provider)
	if err != nil {
		t.Fatal(err)
	}
	fromPreset := p.Apply(&sc.Settings)
	if slices.Contains(fromPreset, "ttl") || slices.Contains(fromPreset, "booking_field") {
		t.Errorf("settings from the file reported as from the preset: %v", fromPreset)
	}
	if *sc.TTL != "2160h" || *sc.BookingField != "" || *sc.Signature != "adyen" || *sc.Item != "/NotificationRequestItem" {
		t.Errorf("after Apply: ttl %q, booking_field %q, signature %q, item %q", *sc.TTL, *sc.BookingField, *sc.Signature, *sc.Item)
	}
	want := "signature event_id key_fields batch item property_field status_field amount_field currency_field amount_minor_units business_key no_money"
	if got := strings.Join(fromPreset, " "); got != want {
		t.Errorf("from the preset: %s\nwant:             %s", got, want)
	}
}

func TestApply_TTLWrittenAsInConfig(t *testing.T) {
	for name, want := range map[string]string{"adyen": "840h", "mews": "5m", "stripe": "168h", "shopify": "48h"} {
		p, _ := provider.Lookup(name)
		var s provider.Settings
		p.Apply(&s)
		if *s.TTL != want {
			t.Errorf("%s: ttl %q, want %q", name, *s.TTL, want)
		}
	}
}
