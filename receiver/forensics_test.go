package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
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

// refundRule is a correlation rule between the OTA (amounts in major units, refunds are
// cancellations) and a payment provider (amounts in cents, refunds by type).
func refundRule(ota, psp *receiver.Source) {
	ota.Correlations = []receiver.Correlation{{Rule: "double-refund", Window: 72 * time.Hour,
		Booking: "/booking_id", Amount: "/refund/amount", Currency: "/refund/currency", Kind: "/status", Kinds: []string{"cancelled"}}}
	psp.Correlations = []receiver.Correlation{{Rule: "double-refund", Window: 72 * time.Hour,
		Booking: "/metadata/booking", Amount: "/amount", Currency: "/currency", AmountMinorUnits: true,
		Kind: "/type", Kinds: []string{"refund.created"}}}
}

func TestProbeFor_Keys(t *testing.T) {
	ota, psp := otaSource(t), otaSource(t)
	psp.Name = "psp"
	ota.BusinessKey = []string{"/property_id", "/booking_id", "/status", "/refund/amount"}
	refundRule(&ota, &psp)
	probe := func(src *receiver.Source, body string) storage.Probe {
		t.Helper()
		p, err := receiver.ProbeFor(src, http.Header{"Webhook-Id": {"evt_1"}}, []byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := probe(&ota, `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":182.5,"currency":"eur"}}`)
	if base.BusinessKey == "" || len(base.Correlations) != 1 || base.BusinessWindow != receiver.DefaultBusinessWindow {
		t.Fatalf("probe = %+v, want a business key, its default window and a correlation key", base)
	}
	// The key lab words a business key found as intake would act on it: a suspect, or,
	// with business_key_blocks, a duplicate.
	blocking := ota
	blocking.BusinessKeyBlocks = true
	if p := probe(&blocking, `{"property_id":"P","booking_id":"B","status":"cancelled"}`); base.BusinessBlocks || !p.BusinessBlocks {
		t.Errorf("probe's business_key_blocks = %v, and %v for a source that blocks", base.BusinessBlocks, p.BusinessBlocks)
	}
	for _, tc := range []struct {
		name              string
		src               *receiver.Source
		body              string
		sameBusiness      bool
		sameCorrelation   bool
		correlationAbsent bool
	}{
		{"MembersInOtherOrder", &ota, `{"refund":{"currency":"EUR","amount":182.50},"status":"cancelled","booking_id":"B","property_id":"P"}`, true, true, false},
		{"AmountAsPaddedText", &ota, `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":"0182.500","currency":"EUR"}}`, false, true, false},
		{"AmountWithExponent", &ota, `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":"1.825e2","currency":"EUR"}}`, false, true, false},
		{"OtherAmount", &ota, `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":18.25,"currency":"EUR"}}`, false, false, false},
		{"AbsentField", &ota, `{"booking_id":"B","status":"cancelled","refund":{"amount":182.5,"currency":"EUR"}}`, false, true, false},
		{"NullField", &ota, `{"property_id":null,"booking_id":"B","status":"cancelled","refund":{"amount":182.5,"currency":"EUR"}}`, false, true, false},
		{"NotARefund", &ota, `{"property_id":"P","booking_id":"B","status":"confirmed","refund":{"amount":182.5,"currency":"EUR"}}`, false, false, true},
		{"NoCurrency", &ota, `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":182.5}}`, true, false, true},
		{"PaymentProviderInCents", &psp, `{"type":"refund.created","amount":18250,"currency":"eur","metadata":{"booking":"B"}}`, false, true, false},
		{"PaymentProviderInCentsWithExponent", &psp, `{"type":"refund.created","amount":"1.825e4","currency":"eur","metadata":{"booking":"B"}}`, false, true, false},
		{"PaymentProviderInCentsAsFraction", &psp, `{"type":"refund.created","amount":"36500/2","currency":"eur","metadata":{"booking":"B"}}`, false, true, false},
		{"PaymentProviderInCentsOtherExponent", &psp, `{"type":"refund.created","amount":"1.825e3","currency":"eur","metadata":{"booking":"B"}}`, false, false, false},
		{"PaymentProviderOtherBooking", &psp, `{"type":"refund.created","amount":18250,"currency":"eur","metadata":{"booking":"C"}}`, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := probe(tc.src, tc.body)
			if got := p.BusinessKey != "" && p.BusinessKey == base.BusinessKey; got != tc.sameBusiness {
				t.Errorf("same business key = %v, want %v (%q)", got, tc.sameBusiness, p.BusinessKey)
			}
			if tc.correlationAbsent {
				if len(p.Correlations) != 0 {
					t.Errorf("correlations = %+v, want none", p.Correlations)
				}
				return
			}
			if len(p.Correlations) != 1 {
				t.Fatalf("correlations = %+v, want one", p.Correlations)
			}
			if got := p.Correlations[0].Hash == base.Correlations[0].Hash; got != tc.sameCorrelation {
				t.Errorf("same correlation key = %v, want %v", got, tc.sameCorrelation)
			}
		})
	}
	// A field absent, null or empty (an empty string, object or array, however spaced)
	// gives no business key at all: two events that both lack a booking id are not one
	// booking's.
	for _, v := range []string{`"property_id":null,`, `"property_id":"",`, ``, `"property_id":{},`,
		`"property_id":[],`, `"property_id":{ },`, `"property_id":[ ` + "\n" + ` ],`} {
		if p := probe(&ota, `{`+v+`"booking_id":"B","status":"cancelled","refund":{"amount":182.5,"currency":"EUR"}}`); p.BusinessKey != "" {
			t.Errorf("property_id %q: business key %q, want none", v, p.BusinessKey)
		}
	}
}

func TestCorrelation_Check(t *testing.T) {
	ok := receiver.Correlation{Rule: "r", Window: time.Hour, Booking: "/b", Amount: "/a", Currency: "/c"}
	for _, tc := range []struct {
		name   string
		mutate func(*receiver.Correlation)
		want   string // in the error; "" for none
	}{
		{"Valid", func(*receiver.Correlation) {}, ""},
		{"NoBooking", func(c *receiver.Correlation) { c.Booking = "" }, "booking: is required"},
		{"BadAmount", func(c *receiver.Correlation) { c.Amount = "amount" }, `amount: "amount" is not a JSON pointer`},
		{"BadTilde", func(c *receiver.Correlation) { c.Currency = "/a~2" }, "currency:"},
		{"KindWithoutKinds", func(c *receiver.Correlation) { c.Kind = "/type" }, "kinds: is required"},
		{"KindsWithoutKind", func(c *receiver.Correlation) { c.Kinds = []string{"refund"} }, "kind: is required"},
		{"NoWindow", func(c *receiver.Correlation) { c.Window = 0 }, "window: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Check()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Check = %v, want %q", err, tc.want)
			}
		})
	}
}

// metric returns the value of one series of the receiver's /metrics, 0 if absent.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	v, _ := scrapeMetric(t, base, series)
	return v
}

func TestHandler_Forensics(t *testing.T) {
	ctx := context.Background()
	ota, psp := otaSource(t), otaSource(t)
	psp.Name = "psp"
	ota.BusinessKey = []string{"/property_id", "/booking_id", "/status", "/refund/amount"}
	ota.CurrencyField = "/refund/currency"
	refundRule(&ota, &psp)
	e := newEnv(t, sqlite.Options{}, ota, psp)
	const refund = `{"property_id":"HTL-LIS-01","booking_id":"BK-1042","status":"cancelled","refund":{"amount":182.5,"currency":"EUR"}}`

	post := func(source, id, body, want string) int64 {
		t.Helper()
		code, a, _ := e.post(t, source, id, body, nil)
		if code != http.StatusOK || a.Status != want {
			t.Fatalf("%s %s: %d %+v, want 200 %s", source, id, code, a, want)
		}
		n, _ := strconv.ParseInt(a.Delivery, 10, 64)
		return n
	}
	first := post("ota", "evt_1", refund, "accepted")

	// The same cancellation under a new id: accepted, suspected.
	again := post("ota", "evt_2", refund, "accepted")
	// The payment provider refunds the same booking, in cents.
	paid := post("psp", "pay_1", `{"type":"refund.created","amount":18250,"currency":"eur","metadata":{"booking":"BK-1042"}}`, "accepted")
	// A redelivery of the first whose amount changed.
	changed := post("ota", "evt_1", strings.Replace(refund, "182.5", "18.25", 1), "duplicate")

	want := map[int64]storage.SuspectKind{again: storage.SuspectBusinessKey, paid: storage.SuspectCorrelation}
	for id, kind := range want {
		f, err := e.db.FlagsOf(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Suspects) != 1 || f.Suspects[0].Kind != kind || f.Suspects[0].Other == 0 {
			t.Errorf("delivery %d: suspects %+v, want one %s", id, f.Suspects, kind)
		}
	}
	if f, _ := e.db.FlagsOf(ctx, paid); len(f.Suspects) == 1 && (f.Suspects[0].OtherSource != "ota" || f.Suspects[0].Other != first) {
		t.Errorf("the double refund names %s %d, want ota %d", f.Suspects[0].OtherSource, f.Suspects[0].Other, first)
	}
	if f, _ := e.db.FlagsOf(ctx, changed); !f.MoneyMismatch {
		t.Error("the redelivery with another amount is no money mismatch")
	}
	// A redelivery once the key's ttl has passed: accepted, a late duplicate.
	clock := storagetest.NewClock(time.Now())
	e.db.Now = clock.Now
	const booking = `{"property_id":"HTL-LIS-01","booking_id":"BK-7","status":"confirmed"}`
	once := post("psp", "pay_9", booking, "accepted")
	clock.Add(ota.TTL + time.Minute)
	late := post("psp", "pay_9", booking, "accepted")
	if f, err := e.db.FlagsOf(ctx, late); err != nil || len(f.Suspects) != 1 || f.Suspects[0].Kind != storage.SuspectLateDuplicate ||
		f.Suspects[0].Other != once {
		t.Errorf("the late redelivery's flags = %+v, %v; want a late duplicate of %d", f, err, once)
	}
	for series, n := range map[string]float64{
		`hookdedup_suspects_total{kind="business_key",source="ota"}`:   1,
		`hookdedup_suspects_total{kind="correlation",source="psp"}`:    1,
		`hookdedup_suspects_total{kind="late_duplicate",source="psp"}`: 1,
		`hookdedup_money_mismatches_total{source="ota"}`:               1,
	} {
		if got := metric(t, e.srv.URL, series); got != n {
			t.Errorf("%s = %v, want %v", series, got, n)
		}
	}
}

func TestHandler_BusinessKeyBlocks(t *testing.T) {
	ota := otaSource(t)
	ota.BusinessKey = []string{"/property_id", "/booking_id", "/status", "/refund/amount"}
	ota.BusinessKeyBlocks = true
	e := newEnv(t, sqlite.Options{}, ota)
	_, first, _ := e.post(t, "ota", "evt_1", cancellation, nil)
	code, again, _ := e.post(t, "ota", "evt_2", cancellation, nil)
	if code != http.StatusOK || again.Status != "duplicate" || again.FirstDelivery != first.Delivery {
		t.Fatalf("re-sent under a new id: %d %+v, want a duplicate of %s", code, again, first.Delivery)
	}
}

// The background sweeps forget traces past remember and business and correlation keys
// past the longest windows: a key seen before the window matches nothing, and its row
// goes.
func TestRunSweeps_Forensics(t *testing.T) {
	ctx := context.Background()
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	clock := storagetest.NewClock(time.Now())
	db.Now = clock.Now
	window := 48 * time.Hour
	d := &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "h", BusinessKey: "B",
		Correlations: []storage.CorrelationKey{{Rule: "r", Hash: "R", Window: window}}, Body: []byte(`{}`)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window}); err != nil {
		t.Fatal(err)
	}
	// The lookups here look back a hundred windows: only the sweep can make them miss.
	far := 100 * window
	probes := []storage.Probe{
		{Source: "psp", Key: "pay_1", Correlations: []storage.CorrelationKey{{Rule: "r", Hash: "R", Window: far}}},
		{Source: "ota", Key: "evt_2", BusinessKey: "B", BusinessWindow: far},
		{Source: "ota", Key: "evt_1"}, // its trace
	}
	flags := func() int {
		t.Helper()
		n := 0
		for _, p := range probes {
			p.Now = clock.Now()
			got, err := db.WouldFlag(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			n += len(got)
		}
		return n
	}
	run := func(remember time.Duration) {
		t.Helper()
		sweepCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			receiver.RunSweeps(sweepCtx, db, receiver.SweepConfig{Every: time.Hour, Batch: 1, Now: clock.Now,
				Remember: remember, BusinessWindow: window, CorrelationWindow: window},
				receiver.NewMetrics(nil), slog.New(slog.DiscardHandler))
			close(done)
		}()
		storagetest.Eventually(t, 10*time.Second, func() error {
			if n := flags(); n != 0 {
				return fmt.Errorf("%d flags still found", n)
			}
			return nil
		})
		cancel()
		<-done
	}
	if _, err := db.SweepExpired(ctx, clock.Now().Add(2*time.Hour), 10); err != nil { // the claim expired: traced
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	if n := flags(); n != 3 {
		t.Fatalf("%d flags before the sweeps, want 3 (business key, correlation, late duplicate)", n)
	}
	clock.Add(window + time.Hour)
	run(window)
}

// TestPresetBusinessKeys: the presets' business keys tell apart the events a provider
// sends for one business object in turn, so that business_key_blocks cannot block
// the one that moves the money: a shopper's second attempt at a payment Adyen
// refused, a refund whose status Stripe reports again as it settles.
func TestPresetBusinessKeys(t *testing.T) {
	keyOf := func(preset, body string) string {
		t.Helper()
		p, ok := provider.Lookup(preset)
		if !ok {
			t.Fatalf("no preset %q", preset)
		}
		src := receiver.Source{Name: preset, Keys: receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields},
			BusinessKey: p.BusinessKey}
		probe, err := receiver.ProbeFor(&src, http.Header{}, []byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if probe.BusinessKey == "" {
			t.Fatalf("%s: no business key for %s", preset, body)
		}
		return probe.BusinessKey
	}
	adyen := func(psp, success string) string {
		return `{"amount":{"currency":"EUR","value":18250},"eventCode":"AUTHORISATION","merchantAccountCode":"HotelBerlinMitte",` +
			`"merchantReference":"ORDER-1","pspReference":"` + psp + `","success":"` + success + `"}`
	}
	stripe := func(id, status string) string {
		return `{"id":"` + id + `","type":"refund.updated","data":{"object":{"id":"re_1","charge":"ch_1","amount":18250,` +
			`"currency":"eur","status":"` + status + `"}}}`
	}
	for _, tc := range []struct {
		name, preset, a, b string
		same               bool
	}{
		{"AdyenRefusedThenAuthorised", "adyen", adyen("P1", "false"), adyen("P2", "true"), false},
		{"AdyenAuthorisedTwice", "adyen", adyen("P1", "true"), adyen("P2", "true"), true},
		{"StripeRefundSettles", "stripe", stripe("evt_1", "pending"), stripe("evt_2", "succeeded"), false},
		{"StripeRefundReportedTwice", "stripe", stripe("evt_1", "succeeded"), stripe("evt_2", "succeeded"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if same := keyOf(tc.preset, tc.a) == keyOf(tc.preset, tc.b); same != tc.same {
				t.Errorf("same business key = %v, want %v", same, tc.same)
			}
		})
	}
}

// TestProbeFor_DuplicateComparison: the probe carries the payload hash and the money
// that intake stores for the same delivery, which the key lab compares a duplicate on.
func TestProbeFor_DuplicateComparison(t *testing.T) {
	src := otaSource(t)
	src.CurrencyField, src.AmountMinorUnits = "/refund/currency", true
	e := newEnv(t, sqlite.Options{}, src)
	body := `{"property_id":"P","booking_id":"B","status":"cancelled","refund":{"amount":18250,"currency":"eur"}}`
	code, a, _ := e.post(t, "ota", "evt_1", body, nil)
	if code != http.StatusOK {
		t.Fatalf("POST = %d %+v", code, a)
	}
	id, _ := strconv.ParseInt(a.Delivery, 10, 64)
	d, err := e.db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := receiver.ProbeFor(&src, http.Header{"Webhook-Id": {"evt_1"}}, []byte(body), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := [4]string{p.PayloadHash, p.Amount, p.Currency, p.EventStatus}
	want := [4]string{d.PayloadHash, d.Amount, d.Currency, d.EventStatus}
	if got != want || want[1] != "182.50" || want[2] != "EUR" {
		t.Errorf("probe's payload hash, amount, currency, status = %q; stored %q", got, want)
	}
}

// TestForensics_BusinessKeyBlankField: a business-key field of blanks alone is as empty
// as "", as a correlation rule takes it: no business key, so two bookings whose ids are
// blank are not one booking's, and business_key_blocks blocks neither.
func TestForensics_BusinessKeyBlankField(t *testing.T) {
	ota := otaSource(t)
	ota.BusinessKey = []string{"/property_id", "/booking_id", "/status", "/refund/amount"}
	probe := func(body string) string {
		t.Helper()
		p, err := receiver.ProbeFor(&ota, http.Header{"Webhook-Id": {"evt_1"}}, []byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p.BusinessKey
	}
	for _, blank := range []string{`" "`, `"   "`, `"\t"`} {
		if bk := probe(`{"property_id":"P","booking_id":` + blank + `,"status":"cancelled","refund":{"amount":80}}`); bk != "" {
			t.Errorf("booking_id %s: business key %q, want none (an empty field, as a correlation rule takes it)", blank, bk)
		}
	}

	// End to end, with business_key_blocks: two cancellations of two different bookings,
	// each with a blank booking id, under two ids: the second is answered duplicate and
	// never handed downstream.
	ota.BusinessKeyBlocks = true
	e := newEnv(t, sqlite.Options{}, ota)
	const a = `{"property_id":"P","booking_id":" ","status":"cancelled","guest":"Ana","refund":{"amount":80}}`
	const b = `{"property_id":"P","booking_id":" ","status":"cancelled","guest":"Bob","refund":{"amount":80}}`
	if code, r, _ := e.post(t, "ota", "evt_a", a, nil); code != 200 || r.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, r)
	}
	if code, r, _ := e.post(t, "ota", "evt_b", b, nil); code != 200 || r.Status != "accepted" {
		t.Errorf("another booking's cancellation, booking id blank: %d %+v, want accepted (not blocked)", code, r)
	}
}

// TestPresets_ShopifyTopicsOfOneOrderAreNoSuspects: Shopify sends one webhook per
// subscribed topic, each with its own X-Shopify-Webhook-Id and X-Shopify-Topic and the
// resource itself as its body, so an order created paid is an orders/create and an
// orders/paid webhook with one body. The second is a webhook of its own, not a re-send of
// the first under a new id: the preset flags no suspect for it.
func TestPresets_ShopifyTopicsOfOneOrderAreNoSuspects(t *testing.T) {
	p, ok := provider.Lookup("shopify")
	if !ok {
		t.Fatal("no shopify preset")
	}
	v, err := signature.New(signature.Config{Scheme: p.Signature, Secrets: []string{"shpss_0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "shopify", Verifier: v, TTL: p.TTL,
		Keys:        receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields},
		AmountField: p.AmountField, CurrencyField: p.CurrencyField, BusinessKey: p.BusinessKey}
	e := newEnv(t, sqlite.Options{}, src)
	const order = `{"id":5798234170418,"name":"#1042","currency":"EUR","total_price":"412.50",` +
		`"financial_status":"paid","created_at":"2026-01-01T10:15:00+01:00","updated_at":"2026-01-01T10:15:01+01:00"}`

	post := func(topic, webhookID string) answer {
		t.Helper()
		code, a, _ := e.post(t, "shopify", "", order, func(req *http.Request) {
			req.Header.Set("X-Shopify-Topic", topic)
			req.Header.Set("X-Shopify-Webhook-Id", webhookID)
			req.Header.Set("X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5")
			if err := v.Sign(req.Header, nil, []byte(order), time.Now()); err != nil {
				t.Fatal(err)
			}
		})
		if code != http.StatusOK || a.Status != "accepted" {
			t.Fatalf("%s: %d %+v, want 200 accepted", topic, code, a)
		}
		return a
	}
	post("orders/create", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
	paid := post("orders/paid", "0d4c5b0e-6a51-4c2f-9d38-7f2f0b1c9e11")
	id, _ := strconv.ParseInt(paid.Delivery, 10, 64)
	f, err := e.db.FlagsOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Suspects) != 0 {
		t.Errorf("the orders/paid webhook of an order whose orders/create came first is flagged %+v: "+
			"a webhook of another topic is no re-send; want no suspect", f.Suspects)
	}
}

// TestHandler_AmountNumberKeptExactly: an amount sent as a JSON number is stored with
// its value as sent, not as the float64 the canonical document holds: what the ledger
// sums is the money that was sent, and a redelivery whose payload changed, its amount
// past a float's digits among it, is a money mismatch.
func TestHandler_AmountNumberKeptExactly(t *testing.T) {
	ctx := context.Background()
	ota := otaSource(t)
	ota.CurrencyField = "/refund/currency"
	e := newEnv(t, sqlite.Options{}, ota)
	post := func(id, amount, note string) int64 {
		t.Helper()
		body := `{"property_id":"P","booking_id":"B","status":"cancelled","note":"` + note + `","refund":{"amount":` + amount + `,"currency":"IDR"}}`
		code, a, _ := e.post(t, "ota", id, body, nil)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %+v", id, code, a)
		}
		n, _ := strconv.ParseInt(a.Delivery, 10, 64)
		return n
	}
	for _, tc := range []struct{ first, changed, stored string }{
		{"12345678901234567.12", "12345678901234567.99", "12345678901234567.12"},
		{"0.1", "0.10000000000000000001", "0.1"},
		{"1.2345678901234567e16", "1.2345678901234568e16", "12345678901234567"},
	} {
		id := "evt_" + tc.first
		first := post(id, tc.first, "sent")
		changed := post(id, tc.changed, "sent again")
		if d, err := e.db.Delivery(ctx, first); err != nil || d.Amount != tc.stored {
			t.Errorf("amount %s stored as %q, %v; want %q", tc.first, d.Amount, err, tc.stored)
		}
		if f, err := e.db.FlagsOf(ctx, changed); err != nil || !f.MoneyMismatch {
			t.Errorf("amount %s, then %s: money mismatch %v, %v; want one", tc.first, tc.changed, f.MoneyMismatch, err)
		}
	}
}
