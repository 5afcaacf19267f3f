package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// oddText holds what some text columns refuse: a NUL byte and invalid UTF-8.
const oddText = "x\x00y\xff"

// TestForensics_OddText: what reaches the forensic methods from outside (a key pasted
// into the key lab, a filter from a URL, a reviewer's name and reason) may hold a NUL
// byte or invalid UTF-8; each is answered, never refused as a database error.
func TestForensics_OddText(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	a := recordEvent(t, db, "ota", "evt_a", "h", "P1", "B1", "cancelled", "100.00")
	s := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: a.ID, Source: "ota",
		Amount: "100.00", Currency: "EUR"})

	window := time.Hour
	flags, err := db.WouldFlag(ctx, storage.Probe{Source: "ota" + oddText, Key: "evt" + oddText, BusinessKey: oddText,
		BusinessWindow: window, Correlations: []storage.CorrelationKey{{Rule: oddText, Hash: oddText, Window: window}},
		Now: db.Clock()})
	if err != nil || len(flags) != 0 {
		t.Errorf("would flag = %+v, %v; want nothing", flags, err)
	}
	page, err := db.Suspects(ctx, storage.SuspectFilter{Source: oddText, Kind: storage.SuspectKind(oddText), State: oddText})
	if err != nil || len(page.Suspects) != 0 {
		t.Errorf("suspects = %+v, %v; want none", page.Suspects, err)
	}
	got, err := db.ReviewSuspect(ctx, s.ID, "olga"+oddText, storage.SuspectConfirmed, "refunded twice "+oddText)
	if err != nil {
		t.Fatalf("review: %v", err)
	}
	stored, err := db.Suspect(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []storage.Suspect{got, stored} {
		if x.State != storage.SuspectConfirmed || !strings.HasPrefix(x.ReviewedBy, "olga") ||
			!strings.HasPrefix(x.Reason, "refunded twice") {
			t.Errorf("reviewed suspect = %+v", x)
		}
	}
	if got.Reason != stored.Reason || got.ReviewedBy != stored.ReviewedBy {
		t.Errorf("review returned %q by %q, stored %q by %q", got.Reason, got.ReviewedBy, stored.Reason, stored.ReviewedBy)
	}
}
