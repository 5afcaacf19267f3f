package receiver_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// rawPost sends body to the source with the given headers and returns the answer as
// it came: status, content type and body.
func rawPost(t *testing.T, e *testEnv, source string, h http.Header, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/webhooks/"+source, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// stored returns the delivery an answer body names.
func stored(t *testing.T, e *testEnv, answerBody string) storage.Delivery {
	t.Helper()
	var a answer
	if err := json.Unmarshal([]byte(answerBody), &a); err != nil {
		t.Fatalf("answer %q: %v", answerBody, err)
	}
	id, err := strconv.ParseInt(a.Delivery, 10, 64)
	if err != nil {
		t.Fatalf("answer %q names no delivery", answerBody)
	}
	d, err := e.db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A sender built on Svix sends svix-id, svix-timestamp and svix-signature: the delivery
// verifies, is keyed on svix-id as it would be on webhook-id, and its redelivery is a
// duplicate.
func TestHandler_SvixHeaders(t *testing.T) {
	src := otaSource(t)
	src.Keys = receiver.KeySpec{EventID: []string{"header:webhook-id"}}
	e := newEnv(t, sqlite.Options{}, src)
	signed := func(body string) http.Header {
		_, svix := svixSigned(t, src, "msg_svix_1", body)
		return svix
	}
	body := `{"event":"reservation.new","reservation":{"_id":"R-1"}}`
	code, _, first := rawPost(t, e, "ota", signed(body), body)
	if code != 200 || !strings.Contains(first, `"status":"accepted"`) || !strings.Contains(first, `"key":"msg_svix_1"`) {
		t.Fatalf("first: %d %s", code, first)
	}
	code, _, again := rawPost(t, e, "ota", signed(body), body)
	if code != 200 || !strings.Contains(again, `"status":"duplicate"`) {
		t.Fatalf("redelivery: %d %s", code, again)
	}
	code, _, tampered := rawPost(t, e, "ota", signed(body), strings.Replace(body, "R-1", "R-2", 1))
	if code != 401 || !strings.Contains(tampered, "does not match") {
		t.Fatalf("tampered: %d %s", code, tampered)
	}
}

// An event id configured as svix-id is read from the headers the signature covers: a
// captured delivery resent with its signed webhook-* headers and a svix-id of the
// attacker's choosing is the same event (a duplicate), not a new one.
func TestHandler_SvixIDIsTheSignedOne(t *testing.T) {
	src := otaSource(t)
	src.Keys = receiver.KeySpec{EventID: []string{"header:svix-id"}}
	e := newEnv(t, sqlite.Options{}, src)
	body := `{"event":"reservation.cancelled","reservation":{"_id":"R-1"}}`
	signed, svix := svixSigned(t, src, "msg_1", body)
	code, _, first := rawPost(t, e, "ota", svix, body)
	if code != 200 || !strings.Contains(first, `"status":"accepted"`) || !strings.Contains(first, `"key":"msg_1"`) {
		t.Fatalf("first, svix-* headers: %d %s", code, first)
	}
	replay := signed.Clone()
	replay.Set("Svix-Id", "msg_forged")
	code, _, again := rawPost(t, e, "ota", replay, body)
	if code != 200 || !strings.Contains(again, `"status":"duplicate"`) || !strings.Contains(again, `"key":"msg_1"`) {
		t.Fatalf("replayed with webhook-* headers and another svix-id: %d %s; want a duplicate of msg_1", code, again)
	}
}

// svixSigned returns the headers of body signed by src as message id under the
// Standard Webhooks names, and the same under Svix's.
func svixSigned(t *testing.T, src receiver.Source, id, body string) (standard, svix http.Header) {
	t.Helper()
	standard = http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}}
	if err := src.Verifier.Sign(standard, url.Values{}, []byte(body), time.Now()); err != nil {
		t.Fatal(err)
	}
	svix = http.Header{"Content-Type": {"application/json"}}
	for _, name := range []string{"Id", "Timestamp", "Signature"} {
		svix.Set("Svix-"+name, standard.Get("Webhook-"+name))
	}
	return standard, svix
}

const githubSecret = "It's a Secret to Everybody"

func githubSource(t *testing.T, form bool) receiver.Source {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "github", Secrets: []string{githubSecret}})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{Name: "github", Verifier: v, Keys: receiver.KeySpec{EventID: []string{"header:X-GitHub-Delivery"}},
		TTL: time.Hour, StatusField: "/action", FormEncoded: form}
}

func githubHeaders(body, contentType, delivery string) http.Header {
	mac := hmac.New(sha256.New, []byte(githubSecret))
	mac.Write([]byte(body))
	return http.Header{
		"Content-Type":        {contentType},
		"X-Github-Delivery":   {delivery},
		"X-Github-Event":      {"issues"},
		"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))},
	}
}

// GitHub's form content type: the signature is checked over the form body as sent,
// which is stored; the key and labels come from the JSON in payload=, so the same event
// sent as JSON has the same payload hash.
func TestHandler_FormEncoded(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, githubSource(t, true))
	const event = `{"action":"opened","issue":{"number":1347,"title":"a & b = c"}}`
	form := "payload=" + url.QueryEscape(event)

	code, _, first := rawPost(t, e, "github", githubHeaders(form, "application/x-www-form-urlencoded", "d-1"), form)
	if code != 200 || !strings.Contains(first, `"status":"accepted"`) || !strings.Contains(first, `"key":"d-1"`) {
		t.Fatalf("form delivery: %d %s", code, first)
	}
	d := stored(t, e, first)
	if string(d.Body) != form || d.ContentType != "application/x-www-form-urlencoded" || d.EventStatus != "opened" {
		t.Fatalf("stored body %q, content type %q, status %q; want the form as sent, labelled from its payload",
			d.Body, d.ContentType, d.EventStatus)
	}

	// The same delivery redelivered as JSON: a duplicate, and not a mismatch.
	code, _, again := rawPost(t, e, "github", githubHeaders(event, "application/json", "d-1"), event)
	if code != 200 || !strings.Contains(again, `"status":"duplicate"`) {
		t.Fatalf("JSON redelivery: %d %s", code, again)
	}
	if dup := stored(t, e, again); dup.Mismatch || dup.PayloadHash != d.PayloadHash {
		t.Errorf("the same event as JSON: mismatch %v, payload hash %s, form's %s", dup.Mismatch, dup.PayloadHash, d.PayloadHash)
	}

	// The signature covers the form body: a changed payload is refused.
	tampered := "payload=" + url.QueryEscape(strings.Replace(event, "1347", "1348", 1))
	code, _, bad := rawPost(t, e, "github", githubHeaders(form, "application/x-www-form-urlencoded", "d-2"), tampered)
	if code != 401 {
		t.Fatalf("tampered form: %d %s", code, bad)
	}

	// Verified, but not a form GitHub sends.
	for _, c := range []struct{ body, want string }{
		{"event=" + url.QueryEscape(event), "no payload field"},
		{"payload=%7B&payload=%7B", "2 payload fields"},
		{"payload=%zz", "could not be decoded"},
		{"payload=" + url.QueryEscape("not json"), "not valid JSON"},
	} {
		code, _, got := rawPost(t, e, "github", githubHeaders(c.body, "application/x-www-form-urlencoded", "d-3"), c.body)
		if code != 400 || !strings.Contains(got, c.want) {
			t.Errorf("form %q: %d %s; want 400 saying %q", c.body, code, got, c.want)
		}
	}
}

// Without form_encoded a form body is not JSON, as before; the refusal names the form
// and the setting that takes it (GitHub's webhook form offers the form content type, and
// a source set up as signature = "github" without the preset would otherwise only hear
// of an invalid character 'p').
func TestHandler_FormEncodedOff(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, githubSource(t, false))
	form := "payload=" + url.QueryEscape(`{"action":"opened"}`)
	code, _, got := rawPost(t, e, "github", githubHeaders(form, "application/x-www-form-urlencoded", "d-1"), form)
	if code != 400 || !strings.Contains(got, "not valid JSON") || !strings.Contains(got, "form_encoded = true") {
		t.Fatalf("form body to a JSON-only source: %d %s; want 400 naming form_encoded", code, got)
	}
	// JSON that is not valid, sent as JSON: no word of forms.
	bad := `{"action":`
	code, _, got = rawPost(t, e, "github", githubHeaders(bad, "application/json", "d-2"), bad)
	if code != 400 || strings.Contains(got, "form") {
		t.Fatalf("invalid JSON body: %d %s; want 400 without a word of forms", code, got)
	}
	// JSON under a form's Content-Type (curl -d sends one) is taken as JSON; refused for
	// what is wrong in it, it is told that, not to send a form's payload field.
	for i, bad := range []string{`{"action":`, ` [1e400]`} {
		code, _, got = rawPost(t, e, "github", githubHeaders(bad, "application/x-www-form-urlencoded", fmt.Sprintf("d-%d", 3+i)), bad)
		if code != 400 || strings.Contains(got, "form_encoded") {
			t.Fatalf("JSON body %q under a form's Content-Type: %d %s; want 400 without the form's hint", bad, code, got)
		}
	}
}

// Adyen expects "[accepted]": accepted and duplicate deliveries get it as text/plain;
// refusals keep their JSON error.
func TestHandler_AnswerAccepted(t *testing.T) {
	src := otaSource(t)
	src.Answer = receiver.AnswerAccepted
	e := newEnv(t, sqlite.Options{}, src)
	sign := func(body string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_a"}}
		if err := src.Verifier.Sign(h, url.Values{}, []byte(body), time.Now()); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, want := range []string{"accepted", "duplicate"} {
		code, ct, body := rawPost(t, e, "ota", sign(cancellation), cancellation)
		if code != 200 || ct != "text/plain; charset=utf-8" || body != "[accepted]" {
			t.Fatalf("%s: %d %q %q; want 200 text/plain [accepted]", want, code, ct, body)
		}
	}
	c := e.counts(t)
	if c.Accepted != 1 || c.Duplicate != 1 {
		t.Fatalf("stored %+v; want one accepted, one duplicate", c)
	}
	code, ct, body := rawPost(t, e, "ota", http.Header{"Content-Type": {"application/json"}}, cancellation)
	if code != 401 || ct != "application/json" || !strings.Contains(body, `"error"`) {
		t.Fatalf("unsigned: %d %q %q; want the JSON refusal", code, ct, body)
	}
}

// Amounts in minor units are stored in major units by the currency's exponent, with
// the currency in upper case; amounts in major units are stored as sent.
func TestHandler_Money(t *testing.T) {
	minor := otaSource(t)
	minor.Name, minor.Keys = "stripe", receiver.KeySpec{EventID: []string{"/id"}}
	minor.AmountField, minor.CurrencyField, minor.AmountMinorUnits = []string{"/data/object/amount"}, "/data/object/currency", true
	major := otaSource(t)
	major.Name, major.Keys = "shop", receiver.KeySpec{EventID: []string{"/id"}}
	major.AmountField, major.CurrencyField = []string{"/total_price"}, "/currency"
	e := newEnv(t, sqlite.Options{}, minor, major)

	for _, c := range []struct{ source, body, amount, currency string }{
		{"stripe", `{"id":"evt_1","data":{"object":{"amount":18250,"currency":"eur"}}}`, "182.50", "EUR"},
		{"stripe", `{"id":"evt_2","data":{"object":{"amount":18000,"currency":"jpy"}}}`, "18000", "JPY"},
		{"stripe", `{"id":"evt_3","data":{"object":{"amount":1250,"currency":"kwd"}}}`, "1.250", "KWD"},
		{"stripe", `{"id":"evt_4","data":{"object":{"amount":995}}}`, "9.95", ""},
		{"stripe", `{"id":"evt_5","data":{"object":{"currency":"usd"}}}`, "", ""},
		{"shop", `{"id":"o_1","total_price":"199.00","currency":"USD"}`, "199.00", "USD"},
		{"shop", `{"id":"o_2","total_price":182.5,"currency":"eur"}`, "182.5", "EUR"},
	} {
		h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_" + c.body[7:12]}}
		if err := minor.Verifier.Sign(h, url.Values{}, []byte(c.body), time.Now()); err != nil {
			t.Fatal(err)
		}
		code, _, got := rawPost(t, e, c.source, h, c.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.body, code, got)
		}
		if d := stored(t, e, got); d.Amount != c.amount || d.Currency != c.currency {
			t.Errorf("%s: stored amount %q currency %q; want %q %q", c.body, d.Amount, d.Currency, c.amount, c.currency)
		}
	}
}

// TestPresets_StripeRefundAmount: the Stripe preset stores the money an event moves.
// charge.refunded carries the Charge, whose amount is what was charged and
// amount_refunded what was refunded: a partial refund of 50.00 on a 500.00 charge, and
// its retry caught as a duplicate, are stored as 50.00; a charge.succeeded as its amount.
func TestPresets_StripeRefundAmount(t *testing.T) {
	src := stripeSource(t)
	e := newEnv(t, sqlite.Options{}, src)
	const event = `{"id":"evt_1QPartialRefund01","object":"event","type":"charge.refunded","data":{"object":` +
		`{"id":"ch_3QHotelCharge0002","object":"charge","amount":50000,"amount_captured":50000,"amount_refunded":5000,` +
		`"currency":"eur","refunded":false,"status":"succeeded"}}}`
	var last answer
	for range 2 { // the event, then Stripe's retry of it: a duplicate caught
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/webhooks/stripe", bytes.NewReader([]byte(event)))
		req.Header.Set("Content-Type", "application/json")
		if err := src.Verifier.Sign(req.Header, nil, []byte(event), time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(raw, &last); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
	}
	if last.Status != "duplicate" {
		t.Fatalf("the retry: %+v, want a duplicate", last)
	}
	id, _ := strconv.ParseInt(last.Delivery, 10, 64)
	d, err := e.db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Amount != "50.00" {
		t.Errorf("the duplicate of a 50.00 partial refund is stored with amount %s %s; want 50.00 EUR, "+
			"the money the refund moves, not the charge's total", d.Amount, d.Currency)
	}

	// Any other event's object holds its money in amount, a Charge's too: one that has
	// not been refunded carries amount_refunded 0.
	const succeeded = `{"id":"evt_1QChargeSucceeded1","object":"event","type":"charge.succeeded","data":{"object":` +
		`{"id":"ch_3QHotelCharge0003","object":"charge","amount":50000,"amount_captured":50000,"amount_refunded":0,` +
		`"currency":"eur","refunded":false,"status":"succeeded"}}}`
	h := http.Header{"Content-Type": {"application/json"}}
	if err := src.Verifier.Sign(h, nil, []byte(succeeded), time.Now()); err != nil {
		t.Fatal(err)
	}
	code, _, got := rawPost(t, e, "stripe", h, succeeded)
	if code != http.StatusOK {
		t.Fatalf("charge.succeeded: %d %s", code, got)
	}
	if d := stored(t, e, got); d.Amount != "500.00" || d.Currency != "EUR" {
		t.Errorf("charge.succeeded of 500.00: stored amount %s %s; want 500.00 EUR", d.Amount, d.Currency)
	}
}

// TestPresets_StripeSecondPartialRefundAmount: a charge.refunded of an API version that
// still lists the charge's refunds (before 2022-11-15) carries the refund it reports as
// the list's first, newest, element; amount_refunded is the sum of every refund so far.
// The second partial refund of a charge, 30.00 after 50.00, and its retry caught as a
// duplicate, are stored as 30.00, not 80.00.
func TestPresets_StripeSecondPartialRefundAmount(t *testing.T) {
	src := stripeSource(t)
	e := newEnv(t, sqlite.Options{}, src)
	const event = `{"id":"evt_1QSecondRefund01","object":"event","api_version":"2020-08-27","type":"charge.refunded",` +
		`"data":{"object":{"id":"ch_3QHotelCharge0004","object":"charge","amount":50000,"amount_captured":50000,` +
		`"amount_refunded":8000,"currency":"eur","refunded":false,"status":"succeeded","refunds":{"object":"list",` +
		`"data":[{"id":"re_3QSecond","object":"refund","amount":3000,"charge":"ch_3QHotelCharge0004","currency":"eur","status":"succeeded"},` +
		`{"id":"re_3QFirst","object":"refund","amount":5000,"charge":"ch_3QHotelCharge0004","currency":"eur","status":"succeeded"}],` +
		`"has_more":false,"total_count":2,"url":"/v1/charges/ch_3QHotelCharge0004/refunds"}}}}`
	var got string
	for range 2 { // the event, then Stripe's retry of it
		h := http.Header{"Content-Type": {"application/json"}}
		if err := src.Verifier.Sign(h, nil, []byte(event), time.Now()); err != nil {
			t.Fatal(err)
		}
		var code int
		code, _, got = rawPost(t, e, "stripe", h, event)
		if code != http.StatusOK {
			t.Fatalf("charge.refunded: %d %s", code, got)
		}
	}
	if d := stored(t, e, got); d.Outcome != storage.Duplicate || d.Amount != "30.00" || d.Currency != "EUR" {
		t.Errorf("the retry of a second partial refund of 30.00: stored %s with amount %s %s; want a duplicate of 30.00 EUR, "+
			"the refund's own money, not the charge's refunds so far", d.Outcome, d.Amount, d.Currency)
	}
}

// TestPresets_StripeZeroDecimalCurrencies: Stripe counts the Malagasy ariary whole, as
// one of its zero-decimal currencies, where ISO 4217 gives it two decimals, and the
// Icelandic króna in hundredths, where ISO 4217 gives it none: a Stripe source stores the
// money Stripe meant.
func TestPresets_StripeZeroDecimalCurrencies(t *testing.T) {
	src := stripeSource(t)
	e := newEnv(t, sqlite.Options{}, src)
	for i, c := range []struct {
		currency string
		amount   int
		want     string
	}{
		{"mga", 50000, "50000"}, // Ar 50,000: Stripe's amount 50000, not 500.00
		{"isk", 27900, "279.00"},
		{"jpy", 18000, "18000"},
		{"eur", 41250, "412.50"},
	} {
		event := fmt.Sprintf(`{"id":"evt_1QZeroDecimal%02d","object":"event","type":"payment_intent.succeeded","data":{"object":`+
			`{"id":"pi_3QZeroDecimal%02d","object":"payment_intent","amount":%d,"currency":%q,"status":"succeeded"}}}`,
			i, i, c.amount, c.currency)
		h := http.Header{"Content-Type": {"application/json"}}
		if err := src.Verifier.Sign(h, nil, []byte(event), time.Now()); err != nil {
			t.Fatal(err)
		}
		code, _, got := rawPost(t, e, "stripe", h, event)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.currency, code, got)
		}
		if d := stored(t, e, got); d.Amount != c.want {
			t.Errorf("Stripe amount %d %s: stored %s %s; want %s", c.amount, c.currency, d.Amount, d.Currency, c.want)
		}
	}
}

// stripeSource is a source as the stripe preset configures one: its signature scheme,
// key, labels and money, its events that moved no money included.
func stripeSource(t *testing.T) receiver.Source {
	t.Helper()
	p, ok := provider.Lookup("stripe")
	if !ok {
		t.Fatal("no stripe preset")
	}
	v, err := signature.New(signature.Config{Scheme: p.Signature, Secrets: []string{"whsec_stripe0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{Name: "stripe", Verifier: v, TTL: p.TTL,
		Keys:        receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields},
		StatusField: p.StatusField, AmountField: p.AmountField, CurrencyField: p.CurrencyField,
		AmountMinorUnits: p.AmountMinorUnits, CurrencyExponents: p.CurrencyExponents, NoMoney: p.NoMoney}
}
