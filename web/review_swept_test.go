package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestConsole_ReviewSuspectOfSweptDelivery: suspects outlive the deliveries retention
// sweeps, and an open one stays counted as money at risk until it is reviewed. Once
// its delivery and the one it may double are swept, the suspects page is the only
// place left that shows it: it must offer the review there, and link to no page that
// is gone.
func TestConsole_ReviewSuspectOfSweptDelivery(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	s := storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: e.dup.ID,
		Other: e.first.ID, Source: "ota", Property: "HTL-1", Booking: "BK-42", Amount: "190.00", Currency: "EUR"})
	sweepPayloads(t, e.db)
	for _, id := range []int64{e.first.ID, e.dup.ID} {
		if _, err := e.db.Delivery(ctx, id); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("delivery %d after the sweep: %v, want it swept", id, err)
		}
	}
	row := func(c *client, path string) nodes {
		t.Helper()
		_, p := c.page(path)
		r := p.withAttr("data-suspect", strconv.FormatInt(s.ID, 10))
		if r.len() != 1 {
			t.Fatalf("the suspects page lists suspect %d %d times, want once", s.ID, r.len())
		}
		return r
	}

	viewer := e.as(t, "viewer")
	r := row(viewer, "/suspects")
	r.shows("swept")
	for _, href := range r.hrefs() {
		if code, _ := viewer.get(href); code != http.StatusOK {
			t.Errorf("the row links to %s, which answers %d", href, code)
		}
	}
	if r.testid("review-form").len() != 0 {
		t.Error("a viewer is offered a review")
	}

	op := e.as(t, "operator")
	form := row(op, "/suspects").testid("review-form")
	if form.len() != 1 {
		t.Fatalf("an operator is offered %d review forms for the open suspect of a swept delivery, want 1", form.len())
	}
	back := form.named("return").attrs("value")
	code, _, h := op.post(form.attrs("action")[0], url.Values{"state": {"dismissed"}, "reason": {"refund reversed by hand"},
		"return": back})
	if code != http.StatusSeeOther || h.Get("Location") != "/suspects" {
		t.Fatalf("review = %d %q, want 303 back to /suspects", code, h.Get("Location"))
	}
	x, err := e.db.Suspect(ctx, s.ID)
	if err != nil || x.State != storage.SuspectDismissed || x.ReviewedBy != "operator" {
		t.Fatalf("suspect after the review = %+v, %v; want dismissed by operator", x, err)
	}
	done := row(op, "/suspects?state=all")
	done.shows("refund reversed by hand")
	if done.testid("review-form").len() != 0 {
		t.Error("a reviewed suspect is still offered a review")
	}
}
