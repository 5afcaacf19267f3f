package receiver_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// One refund reported by the OTA as money going out (-182.50) and by the payment
// provider as a refund of 18250 cents is one refund paid twice: a correlation rule
// compares amounts without their sign.
func TestHandler_CorrelationIgnoresAmountSign(t *testing.T) {
	ctx := context.Background()
	ota, psp := otaSource(t), otaSource(t)
	psp.Name = "psp"
	refundRule(&ota, &psp)
	e := newEnv(t, sqlite.Options{}, ota, psp)
	post := func(source, id, body string) int64 {
		t.Helper()
		code, a, _ := e.post(t, source, id, body, nil)
		if code != http.StatusOK || a.Status != "accepted" {
			t.Fatalf("%s %s: %d %+v, want 200 accepted", source, id, code, a)
		}
		n, _ := strconv.ParseInt(a.Delivery, 10, 64)
		return n
	}
	for _, tc := range []struct{ name, ota, psp string }{
		{"NegativeThenPositive", `"-182.50"`, `18250`},
		{"PositiveThenNegative", `182.5`, `-18250`},
		{"BothNegative", `-182.5`, `"-18250"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			booking := "BK-" + tc.name
			first := post("ota", "evt_"+tc.name, `{"booking_id":"`+booking+`","status":"cancelled","refund":{"amount":`+tc.ota+`,"currency":"EUR"}}`)
			paid := post("psp", "pay_"+tc.name, `{"type":"refund.created","amount":`+tc.psp+`,"currency":"eur","metadata":{"booking":"`+booking+`"}}`)
			f, err := e.db.FlagsOf(ctx, paid)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Suspects) != 1 || f.Suspects[0].Kind != storage.SuspectCorrelation || f.Suspects[0].Other != first {
				t.Errorf("the payment provider's refund: suspects %+v, want a correlation with ota delivery %d", f.Suspects, first)
			}
		})
	}
	// Another amount is another refund, whatever its sign.
	post("ota", "evt_other", `{"booking_id":"BK-other","status":"cancelled","refund":{"amount":"-182.50","currency":"EUR"}}`)
	paid := post("psp", "pay_other", `{"type":"refund.created","amount":18251,"currency":"eur","metadata":{"booking":"BK-other"}}`)
	if f, err := e.db.FlagsOf(ctx, paid); err != nil || len(f.Suspects) != 0 {
		t.Errorf("another amount: suspects %+v, %v; want none", f.Suspects, err)
	}
}
