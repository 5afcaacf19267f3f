package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// twoSources are two sources a correlation rule can name.
const twoSources = `
[[source]]
name = "ota"
signature = "github"
secret = "x"
event_id = "/id"
[[source]]
name = "psp"
signature = "github"
secret = "y"
event_id = "/id"
`

// loadSources reads toml as a config file and builds its sources.
func loadRuled(t *testing.T, toml string) (config, []receiver.Source, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(path, true, getenv)
	if err != nil {
		return cfg, nil, err
	}
	srcs, err := cfg.sources(getenv, func(string) (string, error) { return "", nil })
	return cfg, srcs, err
}

func TestConfig_Forensics(t *testing.T) {
	cfg, srcs, err := loadRuled(t, `remember = "720h"
`+twoSources+`business_key = ["/booking", "/amount"]
business_window = "48h"
business_key_blocks = true

[[correlation]]
name = "double-refund"
window = "72h"
  [[correlation.source]]
  name = "ota"
  booking = "/booking_id"
  amount = "/refund/amount"
  currency = "/refund/currency"
  kind = "/status"
  kinds = ["cancelled"]
  [[correlation.source]]
  name = "psp"
  booking = "/metadata/booking"
  amount = "/amount"
  currency = "/currency"
  amount_minor_units = true
`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Remember != 720*time.Hour {
		t.Errorf("remember = %s", cfg.Remember)
	}
	ota, psp := srcs[0], srcs[1]
	if len(ota.BusinessKey) != 0 || psp.BusinessWindow != 48*time.Hour || !psp.BusinessKeyBlocks || len(psp.BusinessKey) != 2 {
		t.Errorf("business keys: ota %v, psp %v %s %v", ota.BusinessKey, psp.BusinessKey, psp.BusinessWindow, psp.BusinessKeyBlocks)
	}
	if len(ota.Correlations) != 1 || ota.Correlations[0].Kind != "/status" || ota.Correlations[0].Window != 72*time.Hour ||
		len(psp.Correlations) != 1 || !psp.Correlations[0].AmountMinorUnits || psp.Correlations[0].Rule != "double-refund" {
		t.Errorf("correlations: ota %+v, psp %+v", ota.Correlations, psp.Correlations)
	}
	business, correlation := longestWindows(srcs)
	if business != 48*time.Hour || correlation != 72*time.Hour {
		t.Errorf("longest windows = %s, %s", business, correlation)
	}

	// Defaults: remember 90 days; a business key without a window looks back 14 days.
	cfg, srcs, err = loadRuled(t, twoSources+`business_key = ["/booking"]`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Remember != 90*24*time.Hour || srcs[1].BusinessWindow != 14*24*time.Hour || srcs[1].BusinessKeyBlocks {
		t.Errorf("defaults: remember %s, business window %s, blocks %v", cfg.Remember, srcs[1].BusinessWindow, srcs[1].BusinessKeyBlocks)
	}
}

func TestConfig_ForensicsErrors(t *testing.T) {
	rule := func(sources string) string {
		return twoSources + "\n[[correlation]]\nname = \"refunds\"\nwindow = \"72h\"\n" + sources
	}
	part := func(name, extra string) string {
		return "[[correlation.source]]\nname = \"" + name + "\"\nbooking = \"/b\"\namount = \"/a\"\ncurrency = \"/c\"\n" + extra + "\n"
	}
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"UnknownSource", rule(part("ota", "") + part("stripe", "")), []string{`correlation "refunds"`, `source "stripe"`, "no [[source]]"}},
		{"MissingPointer", rule(part("ota", "") + "[[correlation.source]]\nname = \"psp\"\nbooking = \"/b\"\namount = \"/a\"\n"),
			[]string{`correlation "refunds"`, `source "psp"`, "currency: is required"}},
		{"BadPointer", rule(part("ota", "") + strings.Replace(part("psp", ""), `"/a"`, `"amount"`, 1)),
			[]string{`correlation "refunds"`, `source "psp"`, `amount: "amount" is not a JSON pointer`}},
		{"KindWithoutKinds", rule(part("ota", `kind = "/type"`) + part("psp", "")), []string{`correlation "refunds"`, `source "ota"`, "kinds: is required"}},
		{"OneSource", rule(part("ota", "")), []string{`correlation "refunds"`, "at least two"}},
		{"SourceTwice", rule(part("ota", "") + part("ota", "")), []string{`correlation "refunds"`, `source "ota"`, "twice"}},
		{"NoWindow", twoSources + "\n[[correlation]]\nname = \"refunds\"\n" + part("ota", "") + part("psp", ""), []string{`correlation "refunds"`, "window: is required"}},
		{"BareWindow", twoSources + "\n[[correlation]]\nname = \"refunds\"\nwindow = 3600\n" + part("ota", "") + part("psp", ""), []string{`correlation "refunds"`, "window", "nanoseconds"}},
		{"NoName", twoSources + "\n[[correlation]]\nwindow = \"1h\"\n" + part("ota", "") + part("psp", ""), []string{`correlation "#1"`, "name: is required"}},
		{"NameWithNUL", twoSources + "\n[[correlation]]\nname = \"refunds\\u0000\"\nwindow = \"1h\"\n" + part("ota", "") + part("psp", ""),
			[]string{`correlation "refunds\x00"`, "name: must not hold a control character"}},
		{"NameWithLineBreak", twoSources + "\n[[correlation]]\nname = \"refunds\\n\"\nwindow = \"1h\"\n" + part("ota", "") + part("psp", ""),
			[]string{"name: must not hold a control character"}},
		{"UnknownSetting", rule(part("ota", `amount_field = "/x"`) + part("psp", "")), []string{"amount_field"}},
		{"BadBusinessKey", twoSources + `business_key = ["booking"]`, []string{`source "psp"`, `business_key[0]: "booking" is not a JSON pointer`}},
		{"BlocksWithoutKey", twoSources + `business_key_blocks = true`, []string{`source "psp"`, "business_key_blocks", "without business_key"}},
		{"WindowWithoutKey", twoSources + `business_window = "72h"`, []string{`source "psp"`, "business_window", "72h0m0s", "without business_key"}},
		{"BareBusinessWindow", twoSources + `business_window = 60`, []string{`source "psp"`, "business_window", "nanoseconds"}},
		{"BareRemember", "remember = 60\n" + twoSources, []string{"remember", "nanoseconds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadRuled(t, tc.toml)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
