package enginetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// flagsOf returns the suspects on delivery id (those it carries, not those naming it).
func flagsOf(t *testing.T, db storage.Store, id int64) (bool, []storage.Suspect) {
	t.Helper()
	f, err := db.FlagsOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var own []storage.Suspect
	for _, s := range f.Suspects {
		if s.Delivery == id {
			own = append(own, s)
		}
	}
	return f.MoneyMismatch, own
}

func TestRecord_MoneyMismatch(t *testing.T, e Engine) {
	type money struct{ amount, currency, status string }
	first := money{"120.00", "EUR", "cancelled"}
	for _, tc := range []struct {
		name      string
		hash      string // the duplicate's payload hash; the first's is "h1"
		dup       money
		inBatch   bool // both in one request
		wantMoney bool
	}{
		{"SamePayload", "h1", first, false, false},
		{"OtherFieldsDiffer", "h2", first, false, false},
		{"AmountDiffers", "h2", money{"12.00", "EUR", "cancelled"}, false, true},
		{"CurrencyDiffers", "h2", money{"120.00", "USD", "cancelled"}, false, true},
		{"StatusDiffers", "h2", money{"120.00", "EUR", "confirmed"}, false, true},
		{"AmountAbsent", "h2", money{"", "", "cancelled"}, false, true},
		// One amount spelt as a JSON number and as a string, "120.00" and 120.
		{"AmountSpeltOtherwise", "h2", money{"120", "EUR", "cancelled"}, false, false},
		{"AmountWithMoreZeros", "h2", money{"0120.000", "EUR", "cancelled"}, false, false},
		{"AmountNotANumber", "h2", money{"120.00 EUR", "EUR", "cancelled"}, false, true},
		{"AmountNegated", "h2", money{"-120", "EUR", "cancelled"}, false, true},
		{"AmountPastTheBounds", "h2", money{"120." + strings.Repeat("0", 101), "EUR", "cancelled"}, false, true},
		// A number with an exponent is read as the number it is, as correlation reads it.
		{"AmountWithAnExponent", "h2", money{"1.2e2", "EUR", "cancelled"}, false, false},
		{"AmountWithAnExponentUpperCase", "h2", money{"12000E-2", "EUR", "cancelled"}, false, false},
		{"AmountWithAnExponentDiffers", "h2", money{"1.2e1", "EUR", "cancelled"}, false, true},
		{"AmountWithAnExponentAtTheBound", "h2", money{"120" + strings.Repeat("0", 40) + "e-40", "EUR", "cancelled"}, false, false},
		{"AmountWithAnExponentPastTheBound", "h2", money{"120" + strings.Repeat("0", 41) + "e-41", "EUR", "cancelled"}, false, true},
		{"AmountWithAnExponentTooLong", "h2", money{"120." + strings.Repeat("0", 60) + "e0", "EUR", "cancelled"}, false, true},
		{"AmountAsAFraction", "h2", money{"240/2", "EUR", "cancelled"}, false, true},
		{"AmountSpeltOtherwiseInOneRequest", "h2", money{"120.0", "EUR", "cancelled"}, true, false},
		{"AmountDiffersInOneRequest", "h2", money{"99.00", "EUR", "cancelled"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := e.Open(t)
			a := delivery("ota", "evt_1", "h1")
			a.Amount, a.Currency, a.EventStatus = first.amount, first.currency, first.status
			b := delivery("ota", "evt_1", tc.hash)
			b.Amount, b.Currency, b.EventStatus = tc.dup.amount, tc.dup.currency, tc.dup.status
			if tc.inBatch {
				if err := db.RecordBatch(context.Background(), []*storage.Delivery{a, b}, day); err != nil {
					t.Fatal(err)
				}
			} else {
				record(t, db, a, day)
				record(t, db, b, day)
			}
			if b.Outcome != storage.Duplicate {
				t.Fatalf("second = %s, want duplicate", b.Outcome)
			}
			stored, _ := flagsOf(t, db, b.ID)
			if b.MoneyMismatch != tc.wantMoney || stored != tc.wantMoney {
				t.Errorf("money mismatch = %v (stored %v), want %v", b.MoneyMismatch, stored, tc.wantMoney)
			}
			if m, _ := flagsOf(t, db, a.ID); m {
				t.Error("the first delivery is flagged a money mismatch")
			}
		})
	}
}

// bk is a delivery of source with key and business key hash business.
func bk(source, key, business string) *storage.Delivery {
	d := delivery(source, key, "h-"+key)
	d.BusinessKey = business
	d.Property, d.Booking, d.Amount, d.Currency = "p1", "b1", "80.00", "EUR"
	return d
}

func TestRecord_BusinessKey(t *testing.T, e Engine) {
	window := 14 * 24 * time.Hour
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window}
	for _, tc := range []struct {
		name        string
		second      *storage.Delivery
		after       time.Duration
		opt         storage.ClaimOptions
		wantFlagged bool
	}{
		{"SameBusinessKeyOtherKey", bk("ota", "evt_2", "B"), time.Hour, opt, true},
		{"AtTheWindowsEdge", bk("ota", "evt_2", "B"), window, opt, true},
		{"PastTheWindow", bk("ota", "evt_2", "B"), window + time.Millisecond, opt, false},
		{"OtherBusinessKey", bk("ota", "evt_2", "C"), time.Hour, opt, false},
		{"AbsentBusinessKey", bk("ota", "evt_2", ""), time.Hour, opt, false},
		{"OtherSource", bk("pms", "evt_2", "B"), time.Hour, opt, false},
		{"NoWindow", bk("ota", "evt_2", "B"), time.Hour, storage.ClaimOptions{TTL: time.Hour}, false},
		// Its claim expired: a late duplicate, not a business key suspect of itself.
		{"SameKeyAfterExpiry", bk("ota", "evt_1", "B"), 2 * time.Hour, opt, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := e.Open(t)
			clock := newClock(e, db)
			first := record(t, db, bk("ota", "evt_1", "B"), opt)
			clock.Add(tc.after)
			second := record(t, db, tc.second, tc.opt)
			if second.Outcome != storage.Accepted {
				t.Fatalf("second = %s, want accepted", second.Outcome)
			}
			_, sus := flagsOf(t, db, second.ID)
			got := slices.ContainsFunc(sus, func(s storage.Suspect) bool { return s.Kind == storage.SuspectBusinessKey })
			if got != tc.wantFlagged || slices.Contains(second.Suspects, storage.SuspectBusinessKey) != tc.wantFlagged {
				t.Fatalf("flagged = %v (%v), want %v", got, second.Suspects, tc.wantFlagged)
			}
			if !got {
				return
			}
			s := sus[0]
			if s.Other != first.ID || s.Source != "ota" || s.Amount != "80.00" || s.Currency != "EUR" || s.State != storage.SuspectOpen {
				t.Errorf("suspect = %+v, want one naming %d", s, first.ID)
			}
			// The first delivery finds it too, through other.
			f, err := db.FlagsOf(context.Background(), first.ID)
			if err != nil || len(f.Suspects) != 1 || f.Suspects[0].Delivery != second.ID {
				t.Errorf("first's flags = %+v, %v; want the suspect naming it", f, err)
			}
		})
	}
}

func TestRecord_BusinessKeyBlocks(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, Dispatch: true, BusinessWindow: time.Hour, BusinessBlocks: true}
	first := record(t, db, bk("ota", "evt_1", "B"), opt)
	// A re-send under a new id, and its own redelivery in the same request.
	again, redelivered := bk("ota", "evt_2", "B"), bk("ota", "evt_2", "B")
	if err := db.RecordBatch(ctx, []*storage.Delivery{again, redelivered}, opt); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*storage.Delivery{again, redelivered} {
		if d.Outcome != storage.Duplicate || d.FirstDelivery != first.ID {
			t.Errorf("delivery %d = %s of %d, want a duplicate of %d", d.ID, d.Outcome, d.FirstDelivery, first.ID)
		}
		stored, err := db.Delivery(ctx, d.ID)
		if err != nil || stored.Outcome != storage.Duplicate || stored.FirstDelivery != first.ID {
			t.Errorf("stored %d = %+v, %v; want a duplicate of %d", d.ID, stored.Outcome, err, first.ID)
		}
		if _, sus := flagsOf(t, db, d.ID); len(sus) != 0 {
			t.Errorf("a blocked delivery carries suspects %+v", sus)
		}
	}
	// No claim for the blocked key: nothing to dispatch, nothing on the keys pages.
	if _, err := db.Claim(ctx, "ota", "evt_2"); err == nil {
		t.Error("the blocked key holds a claim")
	}
	// A later redelivery of the blocked key is blocked the same way.
	later := record(t, db, bk("ota", "evt_2", "B"), opt)
	if later.Outcome != storage.Duplicate || later.FirstDelivery != first.ID {
		t.Errorf("later = %s of %d, want a duplicate of %d", later.Outcome, later.FirstDelivery, first.ID)
	}
}

func TestRecord_Correlation(t *testing.T, e Engine) {
	window := 72 * time.Hour
	refund := func(source, key, hash string) *storage.Delivery {
		d := delivery(source, key, "h-"+key)
		d.Booking, d.Amount, d.Currency = "BK-1", "120.00", "EUR"
		if hash != "" {
			d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: hash, Window: window}}
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		second      *storage.Delivery
		after       time.Duration
		wantFlagged bool
	}{
		{"OtherSourceSameRefund", refund("psp", "pay_1", "R"), time.Hour, true},
		{"AtTheWindowsEdge", refund("psp", "pay_1", "R"), window, true},
		{"PastTheWindow", refund("psp", "pay_1", "R"), window + time.Millisecond, false},
		{"SameSource", refund("ota", "evt_2", "R"), time.Hour, false},
		{"OtherAmount", refund("psp", "pay_1", "S"), time.Hour, false},
		{"NotRead", refund("psp", "pay_1", ""), time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := e.Open(t)
			clock := newClock(e, db)
			first := record(t, db, refund("ota", "evt_1", "R"), day)
			clock.Add(tc.after)
			second := record(t, db, tc.second, day)
			_, sus := flagsOf(t, db, second.ID)
			if got := len(sus) == 1 && sus[0].Kind == storage.SuspectCorrelation; got != tc.wantFlagged {
				t.Fatalf("suspects = %+v, want flagged %v", sus, tc.wantFlagged)
			}
			if !tc.wantFlagged {
				return
			}
			if s := sus[0]; s.Other != first.ID || s.OtherSource != "ota" || s.Rule != "double-refund" || s.Booking != "BK-1" {
				t.Errorf("suspect = %+v, want one naming %d of ota under double-refund", s, first.ID)
			}
		})
	}
}

func TestRecord_LateDuplicate(t *testing.T, e Engine) {
	ctx := context.Background()
	ttl := storage.ClaimOptions{TTL: time.Hour}
	t.Run("AfterTheSweep", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		first := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		firstSeen := clock.Now()
		clock.Add(2 * time.Hour)
		if n, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil || n != 1 {
			t.Fatalf("sweep = %d, %v; want 1", n, err)
		}
		clock.Add(30 * 24 * time.Hour)
		late := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if late.Outcome != storage.Accepted {
			t.Fatalf("late = %s, want accepted", late.Outcome)
		}
		_, sus := flagsOf(t, db, late.ID)
		if len(sus) != 1 || sus[0].Kind != storage.SuspectLateDuplicate || sus[0].Other != first.ID || !sus[0].FirstSeen.Equal(firstSeen) {
			t.Fatalf("suspects = %+v, want a late duplicate of %d first seen %s", sus, first.ID, firstSeen)
		}
		// Another key of the source is no late duplicate.
		other := record(t, db, delivery("ota", "evt_2", "h2"), ttl)
		if _, sus := flagsOf(t, db, other.ID); len(sus) != 0 {
			t.Errorf("a new key is flagged %+v", sus)
		}
	})
	t.Run("TakeOver", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		first := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		clock.Add(ttl.TTL) // expired at its very end
		late := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if late.Outcome != storage.Accepted || !slices.Equal(late.Suspects, []storage.SuspectKind{storage.SuspectLateDuplicate}) {
			t.Fatalf("late = %s %v, want accepted and a late duplicate", late.Outcome, late.Suspects)
		}
		_, sus := flagsOf(t, db, late.ID)
		if len(sus) != 1 || sus[0].Other != first.ID {
			t.Fatalf("suspects = %+v, want one naming %d", sus, first.ID)
		}
		// The taken-over claim left its trace, as a swept one does.
		probe, err := db.WouldFlag(ctx, storage.Probe{Source: "ota", Key: "evt_1", Now: clock.Now().Add(2 * time.Hour)})
		if err != nil || len(probe) != 1 || probe[0].Kind != storage.SuspectLateDuplicate {
			t.Errorf("would flag = %+v, %v; want a late duplicate", probe, err)
		}
	})
	t.Run("ReleasedIsNoDouble", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "retry"}); err != nil {
			t.Fatal(err)
		}
		clock.Add(2 * time.Hour)
		if _, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
		again := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if len(again.Suspects) != 0 {
			t.Errorf("a released key's next delivery is flagged %v", again.Suspects)
		}
	})
	t.Run("ReleasedAfterATrace", func(t *testing.T) {
		// The key expired once (a trace), came back late, and was then released: its
		// next delivery is no double of the first either.
		db := e.Open(t)
		clock := newClock(e, db)
		record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		clock.Add(2 * time.Hour)
		if _, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
		record(t, db, delivery("ota", "evt_1", "h1"), ttl) // late
		if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "retry"}); err != nil {
			t.Fatal(err)
		}
		again := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if again.Outcome != storage.Accepted || len(again.Suspects) != 0 {
			t.Errorf("a released key's next delivery = %s, flagged %v", again.Outcome, again.Suspects)
		}
	})
	t.Run("TracesAreForgotten", func(t *testing.T) {
		db := e.Open(t)
		clock := newClock(e, db)
		record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		clock.Add(2 * time.Hour)
		if _, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
		remember := 90 * 24 * time.Hour
		clock.Add(remember)
		// expired_at is an hour before the sweep ran: past remember now.
		if n, err := db.SweepTraces(ctx, clock.Now().Add(-remember), 10); err != nil || n != 1 {
			t.Fatalf("sweep traces = %d, %v; want 1", n, err)
		}
		again := record(t, db, delivery("ota", "evt_1", "h1"), ttl)
		if len(again.Suspects) != 0 {
			t.Errorf("flagged %v after the trace was swept", again.Suspects)
		}
	})
}

func TestSweepForensicKeys(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clock := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	for i, key := range []string{"evt_1", "evt_2", "evt_3"} {
		d := bk("ota", key, string(rune('A'+i)))
		d.Correlations = []storage.CorrelationKey{{Rule: "r", Hash: key, Window: time.Hour}}
		record(t, db, d, opt)
		clock.Add(time.Minute)
	}
	cutoff := clock.Now().Add(-90 * time.Second) // after the first two
	if n, err := db.SweepBusinessKeys(ctx, cutoff, 1); err != nil || n != 1 {
		t.Fatalf("sweep business keys = %d, %v; want 1 (the batch's bound)", n, err)
	}
	if n, err := db.SweepBusinessKeys(ctx, cutoff, 10); err != nil || n != 1 {
		t.Fatalf("sweep business keys = %d, %v; want the other old one", n, err)
	}
	if n, err := db.SweepCorrelationKeys(ctx, cutoff, 10); err != nil || n != 2 {
		t.Fatalf("sweep correlation keys = %d, %v; want 2", n, err)
	}
	// The newest is kept and still matched.
	probe, err := db.WouldFlag(ctx, storage.Probe{Source: "ota", Key: "evt_9", BusinessKey: "C", BusinessWindow: time.Hour, Now: clock.Now()})
	if err != nil || len(probe) != 1 || probe[0].Kind != storage.SuspectBusinessKey {
		t.Errorf("would flag = %+v, %v; want the kept business key", probe, err)
	}
}

func TestWouldFlagWritesNothing(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clock := newClock(e, db)
	window := time.Hour
	d := bk("ota", "evt_1", "B")
	d.Correlations = []storage.CorrelationKey{{Rule: "r", Hash: "R", Window: window}}
	first := record(t, db, d, storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window})
	clock.Add(time.Minute)
	p := storage.Probe{Source: "psp", Key: "pay_1", BusinessKey: "B", BusinessWindow: window,
		Correlations: []storage.CorrelationKey{{Rule: "r", Hash: "R", Window: window}}, Now: clock.Now()}
	for range 2 {
		got, err := db.WouldFlag(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// psp has no business key match (other source); the correlation matches.
		if len(got) != 1 || got[0].Kind != storage.SuspectCorrelation || got[0].Other != first.ID {
			t.Fatalf("would flag = %+v, want one correlation naming %d", got, first.ID)
		}
	}
	p.Source = "ota"
	got, err := db.WouldFlag(ctx, p)
	if err != nil || len(got) != 1 || got[0].Kind != storage.SuspectBusinessKey {
		t.Fatalf("would flag = %+v, %v; want a business key (the correlation is the same source's)", got, err)
	}
	if f, _ := db.FlagsOf(ctx, first.ID); len(f.Suspects) != 0 {
		t.Errorf("probing wrote suspects %+v", f.Suspects)
	}
}

// A delivery whose key an operator released was freed on purpose so that its event
// comes in again: a re-send of that event under a new id is that next delivery, not a
// double of the released one, and must not be blocked (never handed downstream, its
// own key never claimed) against it.
func TestRecord_BusinessKeyOfReleasedKey(t *testing.T, e Engine) {
	ctx := context.Background()
	for _, blocks := range []bool{true, false} {
		t.Run(map[bool]string{true: "Blocks", false: "Flags"}[blocks], func(t *testing.T) {
			db := e.Open(t)
			clock := newClock(e, db)
			opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: blocks}
			first := record(t, db, bk("ota", "evt_1", "B"), opt)
			if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ops",
				Reason: "downstream lost it"}); err != nil {
				t.Fatal(err)
			}
			// The re-send comes once the released claim's own window has passed and
			// the sweep has deleted it, still within the business window.
			opt.BusinessWindow = 24 * time.Hour
			clock.Add(2 * time.Hour)
			if n, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil || n != 1 {
				t.Fatalf("sweep = %d, %v; want the released claim", n, err)
			}
			again := record(t, db, bk("ota", "evt_2", "B"), opt)
			if again.Outcome != storage.Accepted {
				t.Fatalf("re-send after the release = %s of %d, want accepted", again.Outcome, again.FirstDelivery)
			}
			if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 {
				t.Errorf("re-send after the release carries suspects %+v", sus)
			}
			flags, err := db.WouldFlag(ctx, storage.Probe{Source: "ota", Key: "evt_3", BusinessKey: "B",
				BusinessWindow: opt.BusinessWindow, Now: clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			// A third re-send doubles the second, which stands; never the released first.
			if len(flags) != 1 || flags[0].Other != again.ID {
				t.Errorf("would flag %+v, want one naming %d (not %d)", flags, again.ID, first.ID)
			}
		})
	}
}

// A key released once its ttl has passed (free, but its claim not yet swept) still has
// its business key forgotten, and the release is audited: without it, a re-send of its
// event under a new id would be flagged, or blocked, for the rest of the business
// window, with nothing an operator could do. A second release changes nothing.
func TestRecord_BusinessKeyOfExpiredReleasedKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clock := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: true}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clock.Add(2 * time.Hour) // past the ttl, not swept
	rel := storage.Release{Source: "ota", Key: "evt_1", Actor: "ops", Reason: "the OTA sends it again"}
	out, err := db.ReleaseKey(ctx, rel)
	if err != nil || !out.Changed || out.Previous != "expired" {
		t.Fatalf("release of an expired key with a business key = %+v, %v; want changed, previously expired", out, err)
	}
	if again, err := db.ReleaseKey(ctx, rel); err != nil || again.Changed {
		t.Errorf("a second release = %+v, %v; want nothing changed", again, err)
	}
	entries, err := db.AuditLog(ctx, 0, 10)
	if err != nil || len(entries) != 1 || entries[0].Key != "evt_1" || entries[0].PreviousState != "expired" {
		t.Errorf("audit = %+v, %v; want the one release", entries, err)
	}
	again := record(t, db, bk("ota", "evt_2", "B"), opt)
	if again.Outcome != storage.Accepted {
		t.Fatalf("re-send after the release = %s of %d, want accepted", again.Outcome, again.FirstDelivery)
	}
	if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 {
		t.Errorf("re-send after the release carries suspects %+v", sus)
	}
}

// A key expired and swept leaves a trace, and its delivery its business key: releasing
// it (no claim is left) forgets both, audited, so that its event can come again under a
// new id or its own without being flagged or blocked; a key that left nothing is still
// no such key.
func TestRecord_BusinessKeyOfSweptReleasedKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clock := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: true}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clock.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clock.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want the expired claim", n, err)
	}
	rel := storage.Release{Source: "ota", Key: "evt_1", Actor: "ops", Reason: "the OTA sends it again"}
	out, err := db.ReleaseKey(ctx, rel)
	if err != nil || !out.Changed || out.Previous != "expired" {
		t.Fatalf("release of a swept key = %+v, %v; want changed, previously expired", out, err)
	}
	if _, err := db.ReleaseKey(ctx, rel); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a second release: %v; want no such key, nothing being left", err)
	}
	if entries, err := db.AuditLog(ctx, 0, 10); err != nil || len(entries) != 1 || entries[0].Key != "evt_1" {
		t.Errorf("audit = %+v, %v; want the one release", entries, err)
	}
	// Under a new id, with its business key; under its own id (with another business
	// key, not to double the first): neither is flagged, the trace being forgotten too.
	for _, d := range []*storage.Delivery{bk("ota", "evt_2", "B"), bk("ota", "evt_1", "C")} {
		again := record(t, db, d, opt)
		if again.Outcome != storage.Accepted {
			t.Fatalf("%s after the release = %s of %d, want accepted", d.Key, again.Outcome, again.FirstDelivery)
		}
		if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 {
			t.Errorf("%s after the release carries suspects %+v", d.Key, sus)
		}
	}
}

// A key released after it came back late (its claim expired and was taken over) is
// freed for the event it carries: a re-send of that event under a new id is the
// delivery it was released for, not a double of the key's earlier delivery either.
func TestRecord_BusinessKeyOfReleasedLateKey(t *testing.T, e Engine) {
	ctx := context.Background()
	for _, blocks := range []bool{true, false} {
		t.Run(map[bool]string{true: "Blocks", false: "Flags"}[blocks], func(t *testing.T) {
			db := e.Open(t)
			clock := newClock(e, db)
			opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: blocks}
			record(t, db, bk("ota", "evt_1", "B"), opt)
			clock.Add(2 * time.Hour)
			late := record(t, db, bk("ota", "evt_1", "B"), opt)
			if late.Outcome != storage.Accepted {
				t.Fatalf("the key's delivery after its claim expired = %s, want accepted", late.Outcome)
			}
			if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ops",
				Reason: "downstream lost it"}); err != nil {
				t.Fatal(err)
			}
			clock.Add(time.Minute)
			again := record(t, db, bk("ota", "evt_2", "B"), opt)
			if again.Outcome != storage.Accepted {
				t.Fatalf("re-send after the release = %s of %d, want accepted", again.Outcome, again.FirstDelivery)
			}
			if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 {
				t.Errorf("re-send after the release carries suspects %+v", sus)
			}
		})
	}
}

// TestWouldFlag_LateDuplicateOfSweptDelivery: a claim past its ttl that the claims
// sweep has not deleted yet, whose first delivery retention has already swept (a ttl
// longer than retention, as a source whose scheme signs no timestamp should have).
// Intake flags its next delivery a late duplicate linked to nothing, the first being
// gone; the key lab's read-only look-up must say the same, not link to a delivery
// that is gone.
func TestWouldFlag_LateDuplicateOfSweptDelivery(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clock := newClock(e, db)
	first := record(t, db, delivery("ota", "evt_1", "h1"), storage.ClaimOptions{TTL: time.Hour})
	clock.Add(2 * time.Hour)
	sweepAll(t, db, clock.Now().Add(-time.Minute), 100)
	if _, err := db.Delivery(ctx, first.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("first delivery after the retention sweep: %v, want it swept", err)
	}
	if _, err := db.Claim(ctx, "ota", "evt_1"); err != nil {
		t.Fatalf("the expired claim: %v, want it still there (the claims sweep has not run)", err)
	}
	got, err := db.WouldFlag(ctx, storage.Probe{Source: "ota", Key: "evt_1", Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != storage.SuspectLateDuplicate || got[0].Other != 0 {
		t.Errorf("would flag = %+v, want a late duplicate linked to nothing", got)
	}
	again := record(t, db, delivery("ota", "evt_1", "h1"), storage.ClaimOptions{TTL: time.Hour})
	_, sus := flagsOf(t, db, again.ID)
	if len(sus) != 1 || sus[0].Kind != storage.SuspectLateDuplicate || sus[0].Other != 0 {
		t.Errorf("intake flagged %+v, want a late duplicate linked to nothing", sus)
	}
}
