package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// presetDelivery is how one sender sends the delivery of receiver/provider/testdata:
// the headers it adds, and what the test changes to tamper with it.
type presetDelivery struct {
	headers http.Header
	// rename renames headers once the delivery is signed: a sender's other spelling of
	// them (Svix's names for Standard Webhooks', Shopify's Events' for its webhooks').
	rename map[string]string
	form   bool // sent as GitHub's form, payload=
	// tamper changes a signed body so that its check fails; "" for a sender whose check
	// covers no body (a shared token): the token is changed instead.
	tamper func([]byte) []byte
}

var presetDeliveries = map[string]presetDelivery{
	"adyen": {
		// amount.value is one of the fields each item's HMAC covers.
		tamper: func(b []byte) []byte { return bytes.Replace(b, []byte("41250"), []byte("41251"), 1) }},
	"apaleo":    {},
	"beds24":    {},
	"channex":   {},
	"cloudbeds": {},
	"github": {headers: http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"issues"}},
		form: true, tamper: appendSpace},
	"guesty": {headers: http.Header{"Webhook-Id": {"msg_2mQ8dWqz5pT4vK9sL1nB7xR3cY"}}, rename: map[string]string{
		"Webhook-Id": "Svix-Id", "Webhook-Timestamp": "Svix-Timestamp", "Webhook-Signature": "Svix-Signature"},
		tamper: appendSpace},
	"mews": {},
	"shopify": {headers: http.Header{"X-Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}, "X-Shopify-Topic": {"orders/updated"}},
		tamper: appendSpace},
	"stripe": {tamper: appendSpace},
}

// presetVariants are deliveries of a preset's sender in another shape it sends, tested
// as the presets' own are; each is named by its preset, "/", and the shape.
var presetVariants = map[string]presetDelivery{
	// Shopify's Events spell Shopify's headers without "X-".
	"shopify/events": {headers: http.Header{"Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}, "Shopify-Topic": {"Order"}},
		rename: map[string]string{"X-Shopify-Hmac-Sha256": "Shopify-Hmac-Sha256"}, tamper: appendSpace},
}

// presetServer serves sources' intake on a new database until the test ends.
func presetServer(t *testing.T, sources []receiver.Source) (*sqlite.DB, *httptest.Server) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rc := receiver.New(receiver.Config{Sources: sources, Store: db})
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return db, srv
}

func appendSpace(b []byte) []byte { return append(bytes.Clone(b), ' ') }

// presetSecret is a secret of the shape the preset's scheme takes.
func presetSecret(p provider.Preset) string {
	switch p.Signature {
	case "adyen":
		return adyenKey
	case "standard-webhooks", "stripe":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	return "a-long-random-shared-token"
}

// Each preset, configured as a user would (provider and a secret), through the real
// handler on a real database: a delivery written in the sender's documented shape and
// signed its way is accepted with the answer the sender expects, its redelivery is a
// duplicate, and a tampered one (or a wrong token) is refused.
func TestPresets_Intake(t *testing.T) {
	if len(presetDeliveries) != len(provider.Names()) {
		t.Fatalf("deliveries for %d presets, want one for each of %v", len(presetDeliveries), provider.Names())
	}
	for _, name := range provider.Names() {
		t.Run(name, func(t *testing.T) { presetIntake(t, name, name, presetDeliveries[name]) })
	}
	for variant, pd := range presetVariants {
		name, _, _ := strings.Cut(variant, "/")
		t.Run(variant, func(t *testing.T) { presetIntake(t, name, variant, pd) })
	}
}

// presetIntake runs TestPresets_Intake's checks on delivery pd of preset name's sender,
// checked as variant's (checkPresetDelivery).
func presetIntake(t *testing.T, name, variant string, pd presetDelivery) {
	p, _ := provider.Lookup(name)
	_, sources, err := loadSources(t, "[[source]]\nname = \""+name+"\"\nprovider = \""+name+"\"\nsecret = \""+
		presetSecret(p)+"\"\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	src := sources[0]
	db, srv := presetServer(t, sources)

	body, err := os.ReadFile(filepath.Join("..", "..", "receiver", "provider", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	h, q := pd.headers.Clone(), url.Values{}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	if pd.form {
		body = []byte("payload=" + url.QueryEscape(string(body)))
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if p.Signature == "adyen" {
		a, err := signature.NewAdyenHMAC([]string{adyenKey})
		if err != nil {
			t.Fatal(err)
		}
		if body, err = a.SignNotification(body); err != nil {
			t.Fatal(err)
		}
	} else if err := src.Verifier.Sign(h, q, body, time.Now()); err != nil {
		t.Fatal(err)
	}
	for from, to := range pd.rename {
		h.Set(to, h.Get(from))
		h.Del(from)
	}
	send := func(h http.Header, q url.Values, body []byte) (int, string, string) {
		t.Helper()
		u := srv.URL + "/webhooks/" + name
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	answered := func(what string, code int, ct, got, status string) {
		t.Helper()
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", what, code, got)
		}
		if p.Answer == provider.AnswerAccepted {
			if got != "[accepted]" || !strings.HasPrefix(ct, "text/plain") {
				t.Fatalf("%s: answer %q (%s), want [accepted] as text", what, got, ct)
			}
			return
		}
		var a struct{ Status string }
		if err := json.Unmarshal([]byte(got), &a); err != nil || a.Status != status {
			t.Fatalf("%s: answer %s, want status %s", what, got, status)
		}
	}

	// A batch sender's request is answered per item: each is accepted first, then
	// each a duplicate.
	want, again := "accepted", "duplicate"
	if p.Batch != "" {
		want, again = "batch", "batch"
	}
	code, ct, got := send(h, q, body)
	answered("delivery", code, ct, got, want)
	code, ct, got = send(h, q, body)
	answered("redelivery", code, ct, got, again)
	counts, err := storagetest.CountDeliveries(context.Background(), db, name)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Accepted < 1 || counts.Duplicate != counts.Accepted || counts.Mismatch != 0 || (p.Batch == "" && counts.Accepted != 1) {
		t.Fatalf("stored %+v; want one accepted and its duplicate", counts)
	}

	badH, badQ, badBody := h.Clone(), url.Values{}, body
	for k, v := range q {
		badQ[k] = v
	}
	switch {
	case pd.tamper != nil:
		badBody = pd.tamper(body)
	case src.Verifier.Scheme() == "token" && len(q) > 0:
		badQ.Set(p.TokenQuery, "not-the-token")
	default:
		badH.Set(p.TokenHeader, "not-the-token")
	}
	if code, _, got := send(badH, badQ, badBody); code != http.StatusUnauthorized {
		t.Fatalf("tampered: %d %s; want 401", code, got)
	}

	first, err := db.Delivery(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	checkPresetDelivery(t, variant, first, body)
}

// checkPresetDelivery checks what a sender's first delivery was stored with, where its
// preset says more than its key.
func checkPresetDelivery(t *testing.T, name string, d storage.Delivery, body []byte) {
	t.Helper()
	switch name {
	case "stripe": // 41250 cents
		if d.Amount != "412.50" || d.Currency != "EUR" || d.EventStatus != "charge.refunded" {
			t.Errorf("stripe: amount %q currency %q status %q; want 412.50 EUR charge.refunded", d.Amount, d.Currency, d.EventStatus)
		}
	case "shopify", "shopify/events": // already in major units
		if d.Amount != "412.50" || d.Currency != "EUR" {
			t.Errorf("%s: amount %q currency %q; want 412.50 EUR", name, d.Amount, d.Currency)
		}
		// Keyed on the delivery id, read from Shopify-Webhook-Id in Events.
		keyFrom := map[string]string{"shopify": "header:X-Shopify-Webhook-Id", "shopify/events": "header:Shopify-Webhook-Id"}[name]
		if d.Key != "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043" || d.KeyFrom != keyFrom {
			t.Errorf("%s: key %q from %q; want the delivery id from %s", name, d.Key, d.KeyFrom, keyFrom)
		}
	case "guesty": // keyed on svix-id as on webhook-id
		// Sent with Svix's header names: the id is read from the svix-id it signs.
		if d.Key != "msg_2mQ8dWqz5pT4vK9sL1nB7xR3cY" || d.KeyFrom != "header:svix-id" {
			t.Errorf("guesty: key %q from %q", d.Key, d.KeyFrom)
		}
	case "github": // the form as sent, keyed and labelled from its payload
		if string(d.Body) != string(body) || d.Key != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || d.EventStatus == "" {
			t.Errorf("github: body %.40q… key %q status %q", d.Body, d.Key, d.EventStatus)
		}
	case "channex", "apaleo", "cloudbeds", "beds24", "mews":
		for _, v := range d.Headers {
			for _, s := range v {
				if strings.Contains(s, "a-long-random-shared-token") {
					t.Errorf("%s: the token was stored in a header: %v", name, d.Headers)
				}
			}
		}
	}
	if d.Outcome != storage.Accepted || d.Status != http.StatusOK {
		t.Errorf("%s: first delivery stored as %s %d", name, d.Outcome, d.Status)
	}
}

// TestPresets_SendersOwnMinorUnits: Adyen counts Chilean pesos and Icelandic krónur in
// hundredths and Cape Verde escudos and Indonesian rupiah whole (as Adyen's Java library's
// Util.getDecimalPlaces does), and Stripe krónur in hundredths, where ISO
// 4217 says otherwise: a source of their provider stores the amount they meant, a
// hundred times smaller (or larger) than ISO 4217's reading; the ledger and four-eyes
// sum what is stored.
func TestPresets_SendersOwnMinorUnits(t *testing.T) {
	_, sources, err := loadSources(t, `
[[source]]
name = "adyen"
provider = "adyen"
secret = "`+adyenKey+`"

[[source]]
name = "own"
signature = "none"
key_fields = ["/id"]
amount_field = "/amount"
currency_field = "/currency"
amount_minor_units = true
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, srv := presetServer(t, sources)
	post := func(source, body string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/webhooks/"+source, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", source, resp.StatusCode, answer)
		}
	}
	a, err := signature.NewAdyenHMAC([]string{adyenKey})
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for i, m := range []struct {
		currency string
		value    int
	}{{"ISK", 279000}, {"CLP", 10000}, {"CVE", 500}, {"EUR", 41250}, {"IDR", 1500000}} {
		items = append(items, fmt.Sprintf(`{"NotificationRequestItem":{"amount":{"currency":%q,"value":%d},"eventCode":"REFUND",`+
			`"merchantAccountCode":"HotelReykjavik","merchantReference":"BK-%d","pspReference":"PSP%d","success":"true"}}`,
			m.currency, m.value, i, i))
	}
	body, err := a.SignNotification([]byte(`{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	post("adyen", string(body))
	post("own", `{"id":"1","amount":279000,"currency":"ISK"}`)
	want := map[string]string{"ISK": "2790.00", "CLP": "100.00", "CVE": "500", "EUR": "412.50", "IDR": "1500000"}
	for id := int64(1); id <= 6; id++ {
		d, err := db.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		w := want[d.Currency]
		if d.Source == "own" {
			w = "279000" // ISO 4217: krónur have no minor unit
		}
		if d.Amount != w {
			t.Errorf("%s delivery %d: %s %s, want %s", d.Source, id, d.Amount, d.Currency, w)
		}
	}
}
