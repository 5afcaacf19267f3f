package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestForensics_InOneBatch pins what the forensic checks decide for several rows of one
// request, where both engines decide in memory before (PostgreSQL) or after (SQLite)
// the rows are written, and where the claims, bodies and flags of rows that a blocked
// row touches must come out as if recorded one by one.
func TestForensics_InOneBatch(t *testing.T, e Engine) {
	ctx := context.Background()
	blocks := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}

	// A blocked row followed by its own redelivery, same body: the redelivery is a
	// duplicate of the earlier delivery, and stores its body whole rather than as a
	// reference to the blocked one (which retention deletes without handing it over).
	t.Run("BlockedThenRedeliveredKeepsItsBody", func(t *testing.T) {
		db := e.Open(t)
		newClock(e, db)
		first := record(t, db, bk("ota", "evt_1", "B"), blocks)
		again, redelivered := bk("ota", "evt_2", "B"), bk("ota", "evt_2", "B")
		if err := db.RecordBatch(ctx, []*storage.Delivery{again, redelivered}, blocks); err != nil {
			t.Fatal(err)
		}
		if redelivered.Outcome != storage.Duplicate || redelivered.FirstDelivery != first.ID || redelivered.Mismatch {
			t.Fatalf("redelivered = %s of %d (mismatch %v), want a duplicate of %d", redelivered.Outcome,
				redelivered.FirstDelivery, redelivered.Mismatch, first.ID)
		}
		got, err := db.Delivery(ctx, redelivered.ID)
		if err != nil || !bytes.Equal(got.Body, redelivered.Body) {
			t.Fatalf("stored body = %q, %v; want %q", got.Body, err, redelivered.Body)
		}
		// Once the blocked delivery is gone, the redelivery's body is still whole.
		if _, err := db.Delivery(ctx, again.ID); err != nil {
			t.Fatal(err)
		}
	})

	// A blocked row whose claim took over an expired one: the claim is gone, not the
	// expired one restored, and the expired one leaves its trace (a later accepted
	// delivery of the key is a late duplicate), as a sweep would have.
	t.Run("BlockedTakeoverLeavesTraceNotClaim", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		ttl := storage.ClaimOptions{TTL: time.Minute}
		old := record(t, db, bk("ota", "evt_2", ""), ttl)
		clock.Add(time.Hour)
		first := record(t, db, bk("ota", "evt_1", "B"), blocks)
		clock.Add(time.Minute)
		blocked := record(t, db, bk("ota", "evt_2", "B"), blocks)
		if blocked.Outcome != storage.Duplicate || blocked.FirstDelivery != first.ID || len(blocked.Suspects) != 0 {
			t.Fatalf("blocked = %s of %d %v, want a duplicate of %d, no flags", blocked.Outcome,
				blocked.FirstDelivery, blocked.Suspects, first.ID)
		}
		if _, err := db.Claim(ctx, "ota", "evt_2"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("claim after the block: %v, want none", err)
		}
		clock.Add(2 * time.Hour) // past the business window
		late := record(t, db, bk("ota", "evt_2", "B"), blocks)
		_, sus := flagsOf(t, db, late.ID)
		if late.Outcome != storage.Accepted || len(sus) != 1 || sus[0].Kind != storage.SuspectLateDuplicate || sus[0].Other != old.ID {
			t.Fatalf("late = %s %+v, want accepted, a late duplicate of %d", late.Outcome, sus, old.ID)
		}
	})

	// A duplicate whose first delivery, in the same request, is blocked: it is compared
	// with that first delivery (the one it lost its claim to), as stored.
	t.Run("MoneyMismatchAgainstABlockedFirst", func(t *testing.T) {
		db := e.Open(t)
		newClock(e, db)
		first := record(t, db, bk("ota", "evt_1", "B"), blocks)
		a, b := bk("ota", "evt_2", "B"), bk("ota", "evt_2", "B")
		b.PayloadHash, b.Amount = "other", "90.00"
		if err := db.RecordBatch(ctx, []*storage.Delivery{a, b}, blocks); err != nil {
			t.Fatal(err)
		}
		stored, _ := flagsOf(t, db, b.ID)
		if b.Outcome != storage.Duplicate || b.FirstDelivery != first.ID || !b.Mismatch || !b.MoneyMismatch || !stored {
			t.Fatalf("b = %s of %d mismatch %v money %v (stored %v); want a money mismatch duplicate of %d",
				b.Outcome, b.FirstDelivery, b.Mismatch, b.MoneyMismatch, stored, first.ID)
		}
	})

	// A row that took over an expired claim and repeats a business key: flagged both,
	// business key first, each naming its own other delivery.
	t.Run("LateAndBusinessKeyOnOneRow", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		flags := storage.ClaimOptions{TTL: time.Minute, BusinessWindow: 24 * time.Hour}
		old := record(t, db, bk("ota", "evt_2", ""), flags)
		first := record(t, db, bk("ota", "evt_1", "B"), flags)
		clock.Add(time.Hour)
		r := record(t, db, bk("ota", "evt_2", "B"), flags)
		want := []storage.SuspectKind{storage.SuspectBusinessKey, storage.SuspectLateDuplicate}
		_, sus := flagsOf(t, db, r.ID)
		if r.Outcome != storage.Accepted || !slices.Equal(r.Suspects, want) || len(sus) != 2 {
			t.Fatalf("r = %s %v (%+v), want accepted %v", r.Outcome, r.Suspects, sus, want)
		}
		for _, s := range sus {
			if (s.Kind == storage.SuspectBusinessKey && s.Other != first.ID) || (s.Kind == storage.SuspectLateDuplicate && s.Other != old.ID) {
				t.Errorf("suspect %+v names the wrong delivery (business %d, late %d)", s, first.ID, old.ID)
			}
		}
	})

	// Two sources of one correlation rule in one request: the second is flagged,
	// naming the first and its source; a third item of the first source is not.
	t.Run("CorrelationAcrossSourcesInOneRequest", func(t *testing.T) {
		db := e.Open(t)
		newClock(e, db)
		c := []storage.CorrelationKey{{Rule: "double-refund", Hash: "C", Window: time.Hour}}
		a, b, a2 := bk("ota", "evt_1", ""), bk("psp", "pay_1", ""), bk("ota", "evt_3", "")
		a.Correlations, b.Correlations, a2.Correlations = c, c, c
		if err := db.RecordBatch(ctx, []*storage.Delivery{a, b, a2}, day); err != nil {
			t.Fatal(err)
		}
		_, sus := flagsOf(t, db, b.ID)
		if len(sus) != 1 || sus[0].Other != a.ID || sus[0].OtherSource != "ota" || sus[0].Rule != "double-refund" {
			t.Fatalf("b's suspects = %+v, want a correlation naming %d of ota", sus, a.ID)
		}
		if _, sus := flagsOf(t, db, a.ID); len(sus) != 0 {
			t.Errorf("a is flagged %+v", sus)
		}
		if _, sus := flagsOf(t, db, a2.ID); len(sus) != 1 || sus[0].Other != b.ID {
			t.Errorf("a2's suspects = %+v, want one naming %d of psp", sus, b.ID)
		}
	})
}

// TestForensics_ReplicasShareABusinessKey: deliveries of one business key under as many
// keys, recorded at once through two handles, each with a correlation key that the
// other source repeats: each source's first stands alone and every other delivery of
// the source is flagged once, none twice, and none fails.
func TestForensics_ReplicasShareABusinessKey(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	dbs := []storage.Store{a, b}
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	const n = 60
	ds := make([]*storage.Delivery, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		source := []string{"ota", "psp"}[i%2]
		ds[i] = bk(source, fmt.Sprintf("evt_%d", i), "B")
		ds[i].Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: "C", Window: time.Hour}}
		wg.Go(func() {
			<-start
			if err := dbs[i/2%2].Record(ctx, ds[i], opt); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	alone := map[string]int{}
	first := map[string]int64{}
	others := map[int64]int64{} // the delivery each business key suspect names
	for _, d := range ds {
		if d.Outcome != storage.Accepted {
			t.Fatalf("%s/%s = %s, want accepted", d.Source, d.Key, d.Outcome)
		}
		_, sus := flagsOf(t, a, d.ID)
		business := 0
		for _, s := range sus {
			if s.Kind == storage.SuspectBusinessKey {
				business++
				others[d.ID] = s.Other
			}
		}
		if business > 1 {
			t.Errorf("%s/%s flagged %d times for its business key", d.Source, d.Key, business)
		}
		if business == 0 {
			alone[d.Source]++
			first[d.Source] = d.ID
		}
	}
	for _, d := range ds {
		if o, ok := others[d.ID]; ok && o != first[d.Source] {
			t.Errorf("%s/%s (%d) names %d, itself a suspect, not the first delivery %d", d.Source, d.Key, d.ID, o, first[d.Source])
		}
	}
	if alone["ota"] != 1 || alone["psp"] != 1 {
		t.Errorf("deliveries not flagged for the business key, by source: %v; want one each", alone)
	}
}

// TestForensics_OddBusinessKey: a business key and a correlation key holding a NUL byte
// and invalid UTF-8 are matched as any other, in one request and across requests, and
// block as any other.
func TestForensics_OddBusinessKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	c := []storage.CorrelationKey{{Rule: "r" + oddText, Hash: oddText, Window: time.Hour}}
	first, second := bk("ota", "evt_1", oddText), bk("ota", "evt_2", oddText)
	pay := bk("psp", "pay_1", "")
	first.Correlations, pay.Correlations = c, c
	if err := db.RecordBatch(ctx, []*storage.Delivery{first, second, pay}, opt); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(second.Suspects, []storage.SuspectKind{storage.SuspectBusinessKey}) ||
		!slices.Equal(pay.Suspects, []storage.SuspectKind{storage.SuspectCorrelation}) {
		t.Fatalf("suspects %v and %v, want a business key and a correlation", second.Suspects, pay.Suspects)
	}
	blocks := opt
	blocks.BusinessBlocks = true
	third := record(t, db, bk("ota", "evt_3", oddText), blocks)
	if third.Outcome != storage.Duplicate || third.FirstDelivery != first.ID {
		t.Fatalf("third = %s of %d, want blocked as a duplicate of %d", third.Outcome, third.FirstDelivery, first.ID)
	}
}
