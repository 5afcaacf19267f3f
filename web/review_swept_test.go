package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
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

// TestConsole_FlagOfSweptOtherDelivery: a delivery's page names, for each of its flags,
// the delivery it may double; once retention swept that one, the page says so rather
// than link to a page that is gone.
func TestConsole_FlagOfSweptOtherDelivery(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	e.clock.Add(48 * time.Hour)
	later := &storage.Delivery{Source: "ota", Key: "evt_later", KeyMethod: "event_id", PayloadHash: "h9", Property: "HTL-1",
		Booking: "BK-42", EventStatus: "cancelled", Amount: "190.00", Body: []byte(`{}`)}
	if err := e.db.Record(ctx, later, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: later.ID,
		Other: e.first.ID, Source: "ota", Property: "HTL-1", Booking: "BK-42", Amount: "190.00"})
	sweepPayloadsBefore(t, e.db, e.clock.Now().Add(-time.Hour))
	if _, err := e.db.Delivery(ctx, e.first.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("delivery %d after the sweep: %v, want it swept", e.first.ID, err)
	}
	c := e.as(t, "operator")
	code, p := c.page("/events/" + strconv.FormatInt(later.ID, 10))
	if code != http.StatusOK {
		t.Fatalf("the later delivery's page = %d", code)
	}
	flags := p.testid("flags")
	flags.shows("suspected duplicate", "swept")
	for _, href := range flags.hrefs() {
		if code, _ := c.get(href); code != http.StatusOK {
			t.Errorf("the flags link to %s, which answers %d", href, code)
		}
	}
	if flags.testid("review-form").len() != 1 {
		t.Error("the open suspect is not offered a review")
	}
}

// sweepPayloadsBefore runs the retention sweep with cutoff: the deliveries received
// before it that are no longer owed downstream are deleted.
func sweepPayloadsBefore(t *testing.T, db *sqlite.DB, cutoff time.Time) {
	t.Helper()
	enginetest.CatchUpRollups(t, db)
	var from storage.SweepCursor
	for range 100 {
		_, next, err := db.SweepDeliveries(context.Background(), db.Now(), cutoff, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if next.Done() {
			return
		}
		from = next
	}
	t.Fatal("the retention sweep did not reach its end")
}
