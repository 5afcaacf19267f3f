package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// A source set up from a preset: the Sources page names the provider, and marks each
// setting the preset supplied, apart from the file's own and the defaults.
func TestConsole_SourcesPreset(t *testing.T) {
	e := newConsoleEnv(t, func(cfg *web.Config) {
		cfg.Sources = append(cfg.Sources, web.Source{Name: "payments", Scheme: "adyen", TTL: 35 * 24 * time.Hour,
			KeyFields: []string{"/pspReference"}, AmountField: []string{"/amount/value"}, CurrencyField: "/amount/currency",
			Provider: "adyen", ProviderTitle: "Adyen", ProviderNote: "Each notification item is checked against its own HMAC.",
			Secrets: []web.Secret{{Masked: "••••", Origin: "from environment variable ADYEN_HMAC_KEY"}},
			Settings: []web.SourceSetting{
				{Name: "name", Value: `"payments"`},
				{Name: "provider", Value: `"adyen"`},
				{Name: "signature", Value: `"adyen"`, FromPreset: true},
				{Name: "ttl", Value: `"2160h"`},
				{Name: "currency_field", Value: `"/amount/currency"`, FromPreset: true},
				{Name: "forward_url", Value: `""`, Default: true},
			}})
	})
	code, body := e.as(t, "admin").get("/sources")
	if code != http.StatusOK {
		t.Fatalf("GET /sources = %d", code)
	}
	page := parsePage(t, body)
	var payments nodes
	for _, s := range page.testid("source").list {
		if sel := (nodes{t, []*html.Node{s}}); sel.testid("provider").len() > 0 {
			payments = sel
		}
	}
	if payments.len() == 0 {
		t.Fatal("no source shows a provider")
	}
	payments.testid("provider").shows("Adyen", `provider = "adyen"`, "checked against its own HMAC")
	payments.shows("currency /amount/currency") // the currency is among the labels read
	from := map[string]string{}
	for _, row := range payments.testid("setting").list {
		sel := nodes{t, []*html.Node{row}}
		from[attr(row, "data-name")] = sel.find(func(x *html.Node) bool { return x.Data == "td" }).text()
	}
	for name, want := range map[string]string{
		"signature":      `"adyen" from preset adyen`,
		"currency_field": `"/amount/currency" from preset adyen`,
		"ttl":            `"2160h" configuration file`,
		"provider":       `"adyen" configuration file`,
		"forward_url":    `"" default`,
	} {
		if got := from[name]; !strings.HasSuffix(got, want) {
			t.Errorf("setting %s shows %q, want it to end %q", name, got, want)
		}
	}
	if n := payments.testid("from-preset").len(); n != 2 {
		t.Errorf("%d settings marked as from the preset, want 2", n)
	}
	// The other sources have no provider and say nothing of one.
	if n := page.testid("provider").len(); n != 1 {
		t.Errorf("%d sources show a provider, want 1", n)
	}
}

// A delivery GitHub sent as a form: its page shows the payload's JSON pretty-printed,
// and the form as sent.
func TestConsole_FormBody(t *testing.T) {
	e := newConsoleEnv(t)
	form := "payload=" + url.QueryEscape(`{"action":"opened","issue":{"number":1347}}`)
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "d-1", KeyMethod: "event_id", PayloadHash: "p",
		ContentType: "application/x-www-form-urlencoded", Body: []byte(form)}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_, body := e.as(t, "viewer").get(fmt.Sprintf("/events/%d", d.ID))
	page := parsePage(t, body)
	page.testid("form-note").shows("payload")
	if got := page.testid("body").text(); !strings.Contains(got, `"number": 1347`) {
		t.Errorf("body shown as %q, want the payload pretty-printed", got)
	}
	page.testid("body-form").shows(form)
}
