package web_test

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// A sender's text that a spreadsheet reads as a formula is written as text in the
// events export, whatever Go's float parser makes of it: "-Inf", "+NaN" and the hex
// float "-0x1p3" are no numbers to a spreadsheet, which reads "=-Inf" and the like as a
// formula naming a cell or a function. Plain decimal amounts stay numbers.
func TestEventsCSV_NumberLikeTextIsNoFormula(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	cells := []string{"-Inf", "+NaN", "-0x1p3", "+infinity", "-1_0"}
	for i, v := range cells {
		d := &storage.Delivery{Source: "ota", Key: "k" + v, KeyMethod: "event_id", PayloadHash: "h", Property: v,
			Booking: v, Amount: "-12.50", Currency: "EUR", Status: 200}
		d.ReceivedAt = time.Now().Add(time.Duration(i) * time.Millisecond)
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := e.as(t, storage.RoleViewer).get("/events.csv")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) < len(cells)+1 {
		t.Fatalf("csv: %d records, %v\n%s", len(recs), err, body)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	for _, r := range recs[1:] {
		if !strings.HasPrefix(r[col["key"]], "k") {
			continue // the environment's own deliveries
		}
		for _, name := range []string{"property", "booking"} {
			if v := r[col[name]]; strings.ContainsAny(v[:1], "=+-@") {
				t.Errorf("%s cell %q starts a formula", name, v)
			}
		}
		if v := r[col["amount"]]; v != "-12.50" && v != "-12.5" {
			t.Errorf("amount cell %q, want the number -12.50", v)
		}
	}
}
