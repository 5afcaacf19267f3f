package web_test

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConsole_LedgerNoAmount: a ledger cell whose every delivery carried no amount says
// so rather than show a sum of 0.00, which a revenue manager reads as nothing at stake;
// one where some did shows their sum and how many carried none. The CSV and the API
// count them too.
func TestConsole_LedgerNoAmount(t *testing.T) {
	e := newConsoleEnv(t)
	recordAmountLedger(t, e.db)
	c := e.as(t, "viewer")
	_, p := c.page("/ledger")
	eur := p.testid("ledger-totals").withAttr("data-currency", "EUR")
	mm := eur.testid("money-mismatches")
	mm.shows("1", "no amount")
	if strings.Contains(mm.text(), "0.00") {
		t.Errorf("money mismatches of no amount show %q; want no sum", mm.text())
	}
	// The money mismatch and the unpaid delivery flagged twice carried none, the paid
	// one 15.00.
	eur.testid("at-risk").shows("3", "EUR 15.00", "+2 without an amount")
	eur.testid("caught").shows("2", "EUR 15.00")
	if got := eur.testid("caught").text(); strings.Contains(got, "without an amount") {
		t.Errorf("money caught %q: counts only duplicates that carried an amount", got)
	}

	_, body := c.get("/ledger.csv?property=HTL-3")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("ledger CSV: %q, %v; want a header and the rows of EUR and of no currency", recs, err)
	}
	head := recs[0]
	if i := slices.Index(head, "no_amount"); i != len(head)-1 || head[i-1] != "unsummed" {
		t.Fatalf("CSV header %q; want no_amount last, after unsummed", head)
	}
	byCurrency := map[string]string{}
	for _, r := range recs[1:] {
		byCurrency[r[3]] = r[len(r)-1]
	}
	// EUR: the two at risk; none: the confirmed double without an amount.
	if byCurrency["EUR"] != "2" || byCurrency[""] != "1" {
		t.Errorf("CSV no_amount by currency %v; want EUR 2, none 1", byCurrency)
	}
}

// TestAPI_LedgerNoAmount: the API's ledger cells count the deliveries that carried no
// amount (no_amount), left out where there are none.
func TestAPI_LedgerNoAmount(t *testing.T) {
	e := newAPIEnv(t)
	recordAmountLedger(t, e.db)
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger", "")
	if code != http.StatusOK {
		t.Fatalf("ledger = %d %v", code, out)
	}
	totals, _ := out["totals"].([]any)
	var eur map[string]any
	for _, x := range totals {
		if row := x.(map[string]any); row["currency"] == "EUR" {
			eur = row
		}
	}
	if eur == nil {
		t.Fatalf("totals %v; want EUR's", totals)
	}
	for kind, want := range map[string]any{"money_mismatch": 1.0, "at_risk": 2.0, "correlation_open": 1.0, "caught": nil} {
		if got := eur[kind].(map[string]any)["no_amount"]; got != want {
			t.Errorf("EUR %s no_amount = %v, want %v", kind, got, want)
		}
	}
}
