package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The indexed business and correlation keys are found by the day each was seen: a
// look-up finds a key seen on any day of its window, the window's first day and first
// millisecond included and the millisecond before it not, and a key seen on a day
// ahead of the clock (a clock set back), whatever days between hold keys or none.
// Every key is moved to its indexed table at once, as intake moves them in the end.
func TestDB_ForensicKeys_AcrossDays(t *testing.T) {
	defer sqlite.SetForensicFlushAt(1)()
	ctx := context.Background()
	db := storagetest.Open(t)
	clock := newClock(db)
	const window = 14 * 24 * time.Hour
	const refundWindow = 72 * time.Hour
	claim := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: window}
	keyed := func(source, key, business, refund string) *storage.Delivery {
		d := delivery(source, key, "h-"+key)
		d.BusinessKey = business
		if refund != "" {
			d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: refund, Window: refundWindow}}
		}
		return d
	}
	record := func(d *storage.Delivery) *storage.Delivery {
		t.Helper()
		if err := db.Record(ctx, d, claim); err != nil {
			t.Fatal(err)
		}
		if d.Outcome != storage.Accepted {
			t.Fatalf("%s: %s, want accepted", d.Key, d.Outcome)
		}
		return d
	}
	// suspect is the suspect of kind that d is flagged as, or that a probe of it at now
	// would be (lab): the delivery it names, 0 for none.
	suspect := func(d *storage.Delivery, kind storage.SuspectKind, lab bool, now time.Time) int64 {
		t.Helper()
		var sus []storage.Suspect
		if lab {
			var err error
			sus, err = db.WouldFlag(ctx, storage.Probe{Source: d.Source, Key: d.Key, BusinessKey: d.BusinessKey,
				BusinessWindow: window, Correlations: d.Correlations, Now: now})
			if err != nil {
				t.Fatal(err)
			}
		} else {
			f, err := db.FlagsOf(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range f.Suspects {
				if s.Delivery == d.ID {
					sus = append(sus, s)
				}
			}
		}
		i := slices.IndexFunc(sus, func(s storage.Suspect) bool { return s.Kind == kind })
		if i < 0 {
			return 0
		}
		return sus[i].Other
	}
	check := func(what string, d *storage.Delivery, kind storage.SuspectKind, want int64) {
		t.Helper()
		if got := suspect(d, kind, false, time.Time{}); got != want {
			t.Errorf("%s: %s names %d, want %d", what, kind, got, want)
		}
	}
	probe := func(what string, d *storage.Delivery, kind storage.SuspectKind, now time.Time, want int64) {
		t.Helper()
		if got := suspect(d, kind, true, now); got != want {
			t.Errorf("%s, in the key lab: %s names %d, want %d", what, kind, got, want)
		}
	}

	start := clock.Now()
	first := record(keyed("ota", "evt_1", "B", "R"))
	// Every day of the window holds keys of other bookings.
	for i := 1; i < 14; i++ {
		clock.Add(24 * time.Hour)
		record(keyed("ota", fmt.Sprintf("fill_%d", i), fmt.Sprintf("F%d", i), fmt.Sprintf("G%d", i)))
		if i == 3 { // the refund's window ends now
			pay := keyed("psp", "pay_1", "", "R")
			probe("the refund 72 hours on", pay, storage.SuspectCorrelation, clock.Now(), first.ID)
			probe("the refund 72 hours and a millisecond on", pay, storage.SuspectCorrelation, clock.Now().Add(time.Millisecond), 0)
		}
	}
	clock.Add(24 * time.Hour)
	if got := clock.Now(); got != start.Add(window) {
		t.Fatalf("clock at %v, want %v", got, start.Add(window))
	}
	again := keyed("ota", "evt_2", "B", "")
	probe("the business key 14 days on", again, storage.SuspectBusinessKey, clock.Now(), first.ID)
	probe("the business key 14 days and a millisecond on", again, storage.SuspectBusinessKey, clock.Now().Add(time.Millisecond), 0)
	record(again)
	check("the business key 14 days on", again, storage.SuspectBusinessKey, first.ID)

	// The clock is set back two days: the keys seen since are ahead of it.
	ahead := record(keyed("ota", "evt_3", "D", "S"))
	clock.Add(-48 * time.Hour)
	late := keyed("ota", "evt_4", "D", "")
	probe("a business key seen ahead of the clock", late, storage.SuspectBusinessKey, clock.Now(), ahead.ID)
	record(late)
	check("a business key seen ahead of the clock", late, storage.SuspectBusinessKey, ahead.ID)
	pay := keyed("psp", "pay_2", "", "S")
	probe("a refund seen ahead of the clock", pay, storage.SuspectCorrelation, clock.Now(), ahead.ID)
	record(pay)
	check("a refund seen ahead of the clock", pay, storage.SuspectCorrelation, ahead.ID)

	pending, indexed, err := db.ForensicKeyCounts(ctx)
	if err != nil || pending != 0 || indexed == 0 {
		t.Fatalf("keys pending %d, indexed %d, %v; want all indexed", pending, indexed, err)
	}
}
