package enginetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestSuspects(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	a := recordEvent(t, db, "ota", "a", "h", "P1", "B1", "cancelled", "100.00")
	b := recordEvent(t, db, "ota", "b", "h", "P1", "B1", "cancelled", "100.00")
	p := recordEvent(t, db, "psp", "c", "h", "P1", "B1", "refunded", "100.00")
	late := recordEvent(t, db, "ota", "d", "h", "P2", "B2", "cancelled", "5")
	s1 := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Other: a.ID,
		Source: "ota", Property: "P1", Booking: "B1", Amount: "100.00", Currency: "EUR"})
	c.Add(time.Hour)
	s2 := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: p.ID, Other: b.ID,
		Source: "psp", OtherSource: "ota", Rule: "refunds", Property: "P1", Booking: "B1", Amount: "100.00", Currency: "EUR"})
	c.Add(time.Hour)
	s3 := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectLateDuplicate, Delivery: late.ID,
		Source: "ota", Property: "P2", Amount: "5", Currency: "EUR", FirstSeen: c.Now().Add(-60 * 24 * time.Hour),
		State: storage.SuspectDismissed})

	list := func(f storage.SuspectFilter) string {
		t.Helper()
		page, err := db.Suspects(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range page.Suspects {
			out = append(out, fmt.Sprint(s.ID))
		}
		if page.Next != 0 {
			out = append(out, fmt.Sprint("next=", page.Next))
		}
		return strings.Join(out, " ")
	}
	id := func(ss ...storage.Suspect) string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprint(s.ID))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		f    storage.SuspectFilter
		want string
	}{
		{"All", storage.SuspectFilter{}, id(s3, s2, s1)},
		{"FlaggedDelivery", storage.SuspectFilter{Delivery: p.ID}, id(s2)},
		{"FlaggedAndOther", storage.SuspectFilter{Delivery: b.ID}, id(s2, s1)},
		{"OtherOnly", storage.SuspectFilter{Delivery: a.ID}, id(s1)},
		{"NoFlags", storage.SuspectFilter{Delivery: 9999}, ""},
		{"Kind", storage.SuspectFilter{Kind: storage.SuspectCorrelation}, id(s2)},
		{"State", storage.SuspectFilter{State: storage.SuspectOpen}, id(s2, s1)},
		{"Source", storage.SuspectFilter{Source: "ota"}, id(s3, s1)},
		{"Time", storage.SuspectFilter{From: s2.FlaggedAt, To: s3.FlaggedAt}, id(s2)},
		{"Page", storage.SuspectFilter{Limit: 2}, id(s3, s2) + fmt.Sprint(" next=", s2.ID)},
		{"NextPage", storage.SuspectFilter{Limit: 2, Before: s2.ID}, id(s1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.f); got != tc.want {
				t.Fatalf("suspects = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("Of", func(t *testing.T) {
		of, err := db.SuspectsOf(ctx, []int64{a.ID, b.ID, late.ID, 9999})
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("a=%s b=%s late=%s none=%d", id(of[a.ID]...), id(of[b.ID]...), id(of[late.ID]...), len(of[9999]))
		if want := fmt.Sprintf("a=%s b=%s late=%s none=0", id(s1), id(s1, s2), id(s3)); got != want {
			t.Fatalf("suspects of = %s, want %s", got, want)
		}
	})

	t.Run("Counts", func(t *testing.T) {
		counts, err := db.SuspectCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, c := range counts {
			fmt.Fprintf(&b, "%s %s %s n=%d %d\n", c.Kind, c.State, c.Currency, c.Money.Count, c.Money.Minor)
		}
		const want = "business_key open EUR n=1 10000\ncorrelation open EUR n=1 10000\nlate_duplicate dismissed EUR n=1 500\n"
		if b.String() != want {
			t.Fatalf("counts:\n%swant:\n%s", b.String(), want)
		}
	})
}

func TestReviewSuspect(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	a := recordEvent(t, db, "ota", "evt_a", "h", "P1", "B1", "cancelled", "100.00")
	b := recordEvent(t, db, "ota", "evt_b", "h", "P1", "B1", "cancelled", "100.00")
	s := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Other: a.ID,
		Source: "ota", Amount: "100.00", Currency: "EUR"})

	audits := func() []storage.AuditEntry {
		t.Helper()
		es, err := db.AuditLog(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}

	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct {
			name          string
			id            int64
			state, reason string
			want          error
		}{
			{"UnknownID", s.ID + 100, storage.SuspectConfirmed, "looked at it", storage.ErrNotFound},
			{"OpenIsNoVerdict", s.ID, storage.SuspectOpen, "looked at it", storage.ErrInvalidReview},
			{"UnknownState", s.ID, "maybe", "looked at it", storage.ErrInvalidReview},
			{"NoReason", s.ID, storage.SuspectConfirmed, "   ", storage.ErrInvalidReview},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := db.ReviewSuspect(ctx, tc.id, "olga", tc.state, tc.reason)
				if !errors.Is(err, tc.want) {
					t.Fatalf("review = %v, want %v", err, tc.want)
				}
			})
		}
		if got, err := db.Suspect(ctx, s.ID); err != nil || got.State != storage.SuspectOpen || got.ReviewedBy != "" {
			t.Fatalf("after refused reviews: %+v, %v; want it open and unreviewed", got, err)
		}
		if es := audits(); len(es) != 0 {
			t.Fatalf("refused reviews wrote audit rows: %+v", es)
		}
	})

	t.Run("ConfirmThenDismiss", func(t *testing.T) {
		c.Add(time.Minute)
		got, err := db.ReviewSuspect(ctx, s.ID, "olga", storage.SuspectConfirmed, "  refunded twice, ticket 12 ")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := db.Suspect(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []storage.Suspect{got, stored} {
			if x.State != storage.SuspectConfirmed || x.ReviewedBy != "olga" || x.Reason != "refunded twice, ticket 12" ||
				!x.ReviewedAt.Equal(c.Now()) {
				t.Fatalf("reviewed suspect = %+v", x)
			}
		}
		es := audits()
		want := fmt.Sprintf("olga|confirm double|ota|evt_b|suspect %d (business_key) on delivery %d: refunded twice, ticket 12|open", s.ID, b.ID)
		if len(es) != 1 || fmt.Sprintf("%s|%s|%s|%s|%s|%s", es[0].Actor, es[0].Action, es[0].Source, es[0].Key, es[0].Reason,
			es[0].PreviousState) != want || !es[0].At.Equal(c.Now()) {
			t.Fatalf("audit = %+v, want one row %s", es, want)
		}
		if _, err := db.ReviewSuspect(ctx, s.ID, "ivan", storage.SuspectDismissed, "same booking, two rooms"); err != nil {
			t.Fatal(err)
		}
		es = audits()
		if len(es) != 2 || es[0].Action != "dismiss suspect" || es[0].PreviousState != storage.SuspectConfirmed || es[0].Actor != "ivan" {
			t.Fatalf("second audit row = %+v", es[0])
		}
	})
}

// TestDB_Events_Forensics: the events list's filters for money mismatches, currencies
// and flags.
func TestEvents_Forensics(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	rec := func(key, hash, amount, currency string) *storage.Delivery {
		d := delivery("ota", key, hash)
		d.Amount, d.Currency = amount, currency
		return record(t, db, d, day)
	}
	a := rec("a", "h", "10", "EUR")
	mmOther := rec("a", "h2", "10", "EUR") // a mismatch in other fields
	mm := rec("a", "h3", "12", "EUR")
	e.SetMoneyMismatch(t, db, mm.ID)
	usd := rec("b", "h", "10", "USD")
	usdDup := rec("b", "h", "10", "USD")
	e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: usd.ID, Other: a.ID, Source: "ota"})
	e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectLateDuplicate, Delivery: a.ID, Source: "ota",
		State: storage.SuspectDismissed})
	for _, tc := range []struct {
		name string
		f    storage.DeliveryFilter
		want []int64
	}{
		{"Mismatch", storage.DeliveryFilter{Mismatch: true}, []int64{mm.ID, mmOther.ID}},
		{"MoneyMismatch", storage.DeliveryFilter{MoneyMismatch: true}, []int64{mm.ID}},
		{"Currency", storage.DeliveryFilter{Currency: "USD"}, []int64{usdDup.ID, usd.ID}},
		{"CurrencyDuplicates", storage.DeliveryFilter{Currency: "USD", Outcome: storage.Duplicate}, []int64{usdDup.ID}},
		{"AnyFlag", storage.DeliveryFilter{Flag: storage.FlagAny}, []int64{usd.ID, a.ID}},
		{"FlagKind", storage.DeliveryFilter{Flag: storage.SuspectBusinessKey}, []int64{usd.ID}},
		{"FlagState", storage.DeliveryFilter{Flag: storage.FlagAny, FlagState: storage.SuspectOpen}, []int64{usd.ID}},
		{"FlagAndCurrency", storage.DeliveryFilter{Flag: storage.FlagAny, Currency: "EUR"}, []int64{a.ID}},
		{"FlagInBatchNone", storage.DeliveryFilter{Flag: storage.FlagAny, Batch: 99}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := db.Deliveries(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(page.Deliveries); fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("deliveries = %v, want %v", got, tc.want)
			}
		})
	}
	got, err := db.Delivery(ctx, mm.ID)
	if err != nil || !got.MoneyMismatch || !got.Mismatch {
		t.Fatalf("delivery %d: money mismatch %v, mismatch %v (%v); want both", mm.ID, got.MoneyMismatch, got.Mismatch, err)
	}
}

// TestReviewSuspect_FromState: a review of a suspect as its reviewer saw it is refused,
// and writes nothing, once another review changed it, so that two operators reviewing
// one open suspect at once (on one handle or two) give one verdict, not a second that
// silently overturns the first.
func TestReviewSuspect_FromState(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	other := e.Reopen(t, db)
	a := recordEvent(t, db, "ota", "evt_a", "h", "P1", "B1", "cancelled", "100.00")
	b := recordEvent(t, db, "ota", "evt_b", "h", "P1", "B1", "cancelled", "100.00")
	s := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Other: a.ID,
		Source: "ota", Amount: "100.00", Currency: "EUR"})

	// Two operators at once, each on their own handle, from the open suspect.
	type result struct {
		x     storage.Suspect
		err   error
		actor string
	}
	results := make(chan result, 2)
	var start sync.WaitGroup
	start.Add(1)
	for _, r := range []struct {
		h            storage.Store
		actor, state string
	}{{db, "olga", storage.SuspectConfirmed}, {other, "piet", storage.SuspectDismissed}} {
		go func() {
			start.Wait()
			x, err := r.h.ReviewSuspectFrom(ctx, s.ID, r.actor, storage.SuspectOpen, r.state, "looked at it")
			results <- result{x, err, r.actor}
		}()
	}
	start.Done()
	var won, lost result
	for range 2 {
		r := <-results
		switch {
		case r.err == nil:
			won = r
		case errors.Is(r.err, storage.ErrReviewedMeanwhile):
			lost = r
		default:
			t.Fatalf("%s's review: %v", r.actor, r.err)
		}
	}
	if won.actor == "" || lost.actor == "" {
		t.Fatalf("reviews from open at once: %+v and %+v; want one done and one refused as reviewed meanwhile", won, lost)
	}
	if lost.x.State != won.x.State || lost.x.ReviewedBy != won.actor {
		t.Errorf("the refused review returns %+v; want the suspect as %s left it (%s)", lost.x, won.actor, won.x.State)
	}
	stored, err := db.Suspect(ctx, s.ID)
	if err != nil || stored.State != won.x.State || stored.ReviewedBy != won.actor {
		t.Fatalf("stored suspect %+v, %v; want %s's verdict %s", stored, err, won.actor, won.x.State)
	}
	es, err := db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Actor != won.actor || es[0].PreviousState != storage.SuspectOpen {
		t.Fatalf("audit rows %+v; want one, %s's, from open", es, won.actor)
	}
	if _, err := db.RollupSuspects(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	counts, err := db.SuspectCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].State != won.x.State || counts[0].Money.Count != 1 || counts[0].Money.Minor != 10000 {
		t.Errorf("suspect counts %+v; want one suspect of EUR 100.00, %s", counts, won.x.State)
	}

	// Reviewed again from the state it is in: done, as ReviewSuspect would.
	again := storage.SuspectConfirmed
	if won.x.State == storage.SuspectConfirmed {
		again = storage.SuspectDismissed
	}
	if x, err := other.ReviewSuspectFrom(ctx, s.ID, lost.actor, won.x.State, again, "second look"); err != nil || x.State != again {
		t.Fatalf("review from %s: %+v, %v; want %s", won.x.State, x, err, again)
	}
}
