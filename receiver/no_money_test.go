package receiver_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A refund that failed moved no money: it is stored without an amount, so that neither
// the ledger's money caught nor a suspect's money at stake counts it, and no correlation
// rule takes it for a second refund of the booking. Its currency and its payload stay.
func TestHandler_FailedRefundMovesNoMoney(t *testing.T) {
	ctx := context.Background()
	stripe, ok := provider.Lookup("stripe")
	if !ok {
		t.Fatal("no stripe preset")
	}
	ota, psp := otaSource(t), otaSource(t)
	ota.CurrencyField = "/refund/currency"
	psp.Name = "psp"
	psp.StatusField = "/type"
	psp.AmountField = []string{"/amount"}
	psp.CurrencyField = "/currency"
	psp.AmountMinorUnits = true
	psp.BusinessKey = []string{"/metadata/booking", "/amount", "/status"}
	psp.NoMoney = stripe.NoMoney
	refundRule(&ota, &psp)
	// The rule reads every refund event; the failed ones must still not count.
	psp.Correlations[0].Kinds = []string{"refund.created", "refund.failed", "charge.refund.updated"}
	e := newEnv(t, sqlite.Options{}, ota, psp)
	post := func(source, id, body, want string) storage.Delivery {
		t.Helper()
		code, a, _ := e.post(t, source, id, body, nil)
		if code != http.StatusOK || a.Status != want {
			t.Fatalf("%s %s: %d %+v, want 200 %s", source, id, code, a, want)
		}
		n, _ := strconv.ParseInt(a.Delivery, 10, 64)
		d, err := e.db.Delivery(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	post("ota", "evt_cancel", `{"booking_id":"BK-1","status":"cancelled","refund":{"amount":"182.50","currency":"EUR"}}`, "accepted")
	failed := `{"type":"refund.failed","amount":18250,"currency":"eur","status":"failed","metadata":{"booking":"BK-1"}}`
	for _, tc := range []struct{ name, id, body, want string }{
		{"RefundFailed", "re_failed", failed, "accepted"},
		{"RefundFailedAgain", "re_failed", failed, "duplicate"},
		{"RefundUpdatedToFailed", "re_updated", `{"type":"charge.refund.updated","amount":18250,"currency":"eur","status":"failed","metadata":{"booking":"BK-1"},"data":{"object":{"status":"failed"}}}`, "accepted"},
	} {
		d := post("psp", tc.id, tc.body, tc.want)
		if d.Amount != "" || d.Currency != "EUR" {
			t.Errorf("%s: stored amount %q currency %q, want no amount in EUR", tc.name, d.Amount, d.Currency)
		}
		if string(d.Body) != tc.body {
			t.Errorf("%s: body %s, want it as sent", tc.name, d.Body)
		}
		f, err := e.db.FlagsOf(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Suspects {
			if s.Kind == storage.SuspectCorrelation {
				t.Errorf("%s: flagged %+v, a suspected double refund of a refund that failed", tc.name, s)
			}
		}
	}
	counts, err := e.db.SuspectCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.Money.Minor != 0 {
			t.Errorf("suspects %s %s %s: %d minor units at stake, want none: no refund was paid twice", c.Kind, c.State, c.Currency, c.Money.Minor)
		}
	}
	// A refund that succeeded is money as before.
	if d := post("psp", "re_ok", `{"type":"refund.created","amount":18250,"currency":"eur","status":"succeeded","metadata":{"booking":"BK-1"}}`, "accepted"); d.Amount != "182.50" {
		t.Errorf("a refund that succeeded: stored amount %q, want 182.50", d.Amount)
	}
}

// Adyen reports a refused request with success "false", and a refund or capture the
// card scheme rejected afterwards as REFUND_FAILED or CAPTURE_FAILED: none moved money.
func TestProbeFor_AdyenFailedRefundMovesNoMoney(t *testing.T) {
	adyen, ok := provider.Lookup("adyen")
	if !ok {
		t.Fatal("no adyen preset")
	}
	src := receiver.Source{
		Name: "adyen", Keys: receiver.KeySpec{EventID: []string{"/pspReference"}},
		AmountField: adyen.AmountField, CurrencyField: adyen.CurrencyField, AmountMinorUnits: true,
		NoMoney: adyen.NoMoney,
	}
	for _, tc := range []struct{ code, success, want string }{
		{"REFUND", "true", "182.50"},
		{"REFUND", "false", ""},
		{"REFUND_FAILED", "true", ""},
		{"CAPTURE_FAILED", "true", ""},
		{"AUTHORISATION", "false", ""},
		{"CAPTURE", "true", "182.50"},
	} {
		body := `{"pspReference":"P1","eventCode":"` + tc.code + `","success":"` + tc.success + `","amount":{"value":18250,"currency":"EUR"}}`
		p, err := receiver.ProbeFor(&src, http.Header{}, []byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if p.Amount != tc.want || p.Currency != "EUR" {
			t.Errorf("%s success %s: amount %q %q, want %q EUR", tc.code, tc.success, p.Amount, p.Currency, tc.want)
		}
	}
}

func TestCheckNoMoney(t *testing.T) {
	if err := receiver.CheckNoMoney([]string{"/success = false", "/status = failed | canceled"}); err != nil {
		t.Errorf("good conditions: %v", err)
	}
	for _, bad := range []string{"/success", "success = false", "/status = failed|", "/status ="} {
		err := receiver.CheckNoMoney([]string{bad})
		if err == nil || !strings.Contains(err.Error(), "no_money[0]") {
			t.Errorf("%q: %v, want an error naming no_money[0]", bad, err)
		}
	}
}
