package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// Two operators with one open suspect on their screens: the second one's review, sent
// after the first one's, keeps the first verdict and says who gave it, rather than
// overturning it unseen.
func TestConsole_ReviewOfASuspectReviewedMeanwhile(t *testing.T) {
	e, s := flagEnv(t)
	ctx := context.Background()
	page := fmt.Sprintf("/events/%d", e.dup.ID)
	c := e.as(t, "operator")
	_, p := c.page(page)
	if p.testid("review-form").len() != 1 {
		t.Fatal("the operator is shown no review form of the open suspect")
	}
	if _, err := e.db.ReviewSuspect(ctx, s.ID, "olga", storage.SuspectConfirmed, "refunded twice, ticket 12"); err != nil {
		t.Fatal(err)
	}
	code, _, h := c.post(fmt.Sprintf("/suspects/%d/review", s.ID), url.Values{"state": {"dismissed"}, "reason": {"two rooms"}, "return": {page}})
	if code != http.StatusSeeOther || h.Get("Location") != page {
		t.Fatalf("review = %d %q, want 303 back", code, h.Get("Location"))
	}
	_, p = c.page(page)
	p.testid("flash").shows("reviewed meanwhile by olga", "confirmed double", "nothing changed")
	x, err := e.db.Suspect(ctx, s.ID)
	if err != nil || x.State != storage.SuspectConfirmed || x.ReviewedBy != "olga" {
		t.Fatalf("suspect %+v, %v; want olga's confirmed double kept", x, err)
	}
	es, err := e.db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range es {
		if a.Action == "dismiss suspect" {
			t.Errorf("the refused review wrote an audit row: %+v", a)
		}
	}
}

// The API's review takes the state its client saw: one that no longer holds is a 409
// that says what the suspect is now; without it, a review is done whatever the state.
func TestAPI_ReviewFromState(t *testing.T) {
	e := newAPIEnv(t)
	first := e.record(t, "k1", `{"booking_id":"BK-1","refund":{"amount":10}}`, false)
	other := e.record(t, "k2", `{"booking_id":"BK-1","refund":{"amount":10}}`, false)
	s := storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: other.ID, Other: first.ID,
		Source: "ota", Booking: "BK-1", Amount: "10.00", Currency: "EUR"})
	path := "/api/v1/suspects/" + idStr(s.ID) + "/review"
	if code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"confirmed","reason":"x","from":"maybe"}`); code != 400 {
		t.Errorf("from=maybe = %d %v, want 400", code, out)
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"confirmed","reason":"refunded twice","from":"open"}`); code != 200 || out["state"] != "confirmed" {
		t.Fatalf("review from open = %d %v", code, out)
	}
	code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"dismissed","reason":"two rooms","from":"open"}`)
	if msg, _ := out["error"].(string); code != http.StatusConflict || msg == "" {
		t.Fatalf("second review from open = %d %v, want 409", code, out)
	}
	if x, _ := e.db.Suspect(context.Background(), s.ID); x.State != storage.SuspectConfirmed {
		t.Fatalf("after the refused review: %+v", x)
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"dismissed","reason":"two rooms","from":"confirmed"}`); code != 200 || out["state"] != "dismissed" {
		t.Fatalf("review from confirmed = %d %v", code, out)
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"confirmed","reason":"after all"}`); code != 200 || out["state"] != "confirmed" {
		t.Fatalf("review without from = %d %v", code, out)
	}
}
