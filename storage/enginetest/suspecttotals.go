package enginetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// suspectBook is a hand count of suspects: every suspect added and the state it has,
// from which the counts the engine reports are worked out again here.
type suspectBook struct {
	e  Engine
	db storage.Store
	s  map[int64]storage.Suspect
}

func newSuspectBook(e Engine, db storage.Store) *suspectBook {
	return &suspectBook{e: e, db: db, s: map[int64]storage.Suspect{}}
}

func (b *suspectBook) add(t *testing.T, s storage.Suspect) storage.Suspect {
	t.Helper()
	s = b.e.AddSuspect(t, b.db, s)
	b.s[s.ID] = s
	return s
}

func (b *suspectBook) review(t *testing.T, db storage.Store, id int64, state string) {
	t.Helper()
	if _, err := db.ReviewSuspect(context.Background(), id, "olga", state, "looked at it"); err != nil {
		t.Fatalf("review suspect %d: %v", id, err)
	}
	s := b.s[id]
	s.State = state
	b.s[id] = s
}

// counts is the hand count as SuspectCounts writes it, one line per kind, state and
// currency, in its order.
func (b *suspectBook) counts() string {
	type key struct {
		kind            storage.SuspectKind
		state, currency string
	}
	type seen struct {
		kind     storage.SuspectKind
		state    string
		delivery int64
	}
	sums, suspects, counted := map[key]*storage.Money{}, map[key]int64{}, map[seen]bool{}
	for _, id := range slices.Sorted(maps.Keys(b.s)) {
		s := b.s[id]
		k := key{s.Kind, s.State, s.Currency}
		if sums[k] == nil {
			sums[k] = &storage.Money{}
		}
		suspects[k]++
		// Each delivery's money once in its kind and state.
		if d := (seen{s.Kind, s.State, s.Delivery}); !counted[d] {
			counted[d] = true
			sums[k].AddAmount(s.Amount, s.Currency)
		}
	}
	var cs []storage.SuspectCount
	for k, m := range sums {
		cs = append(cs, storage.SuspectCount{Kind: k.kind, State: k.state, Currency: k.currency, Suspects: suspects[k], Money: *m})
	}
	slices.SortFunc(cs, func(a, b storage.SuspectCount) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		if c := strings.Compare(a.State, b.State); c != 0 {
			return c
		}
		return storage.CompareCurrency(a.Currency, b.Currency)
	})
	return formatSuspectCounts(cs)
}

// open is the hand count of open suspects per source, as OpenSuspects writes it.
func (b *suspectBook) open() string {
	m := map[string]int64{}
	for _, s := range b.s {
		if s.State == storage.SuspectOpen {
			m[s.Source]++
		}
	}
	return fmt.Sprint(m)
}

func formatSuspectCounts(cs []storage.SuspectCount) string {
	var w strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&w, "%s %s %q n=%d minor=%d unsummed=%d", c.Kind, c.State, c.Currency, c.Money.Count, c.Money.Minor, c.Money.Unsummed)
		if c.Money.NoAmount != 0 {
			fmt.Fprintf(&w, " no_amount=%d", c.Money.NoAmount)
		}
		if c.Suspects != c.Money.Count {
			fmt.Fprintf(&w, " suspects=%d", c.Suspects)
		}
		w.WriteString("\n")
	}
	return w.String()
}

// check compares what db reports with the hand count.
// wantSuspectCounts checks db's suspect counts, as formatSuspectCounts writes them,
// against want.
func wantSuspectCounts(t *testing.T, db storage.Store, when, want string) {
	t.Helper()
	cs, err := db.SuspectCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := formatSuspectCounts(cs); got != want {
		t.Errorf("%s: counts:\n%swant:\n%s", when, got, want)
	}
}

func (b *suspectBook) check(t *testing.T, db storage.Store, when string) {
	t.Helper()
	ctx := context.Background()
	cs, err := db.SuspectCounts(ctx)
	if err != nil {
		t.Fatalf("%s: suspect counts: %v", when, err)
	}
	if got, want := formatSuspectCounts(cs), b.counts(); got != want {
		t.Errorf("%s: suspect counts:\n%swant:\n%s", when, got, want)
	}
	open, err := db.OpenSuspects(ctx)
	if err != nil {
		t.Fatalf("%s: open suspects: %v", when, err)
	}
	if got, want := fmt.Sprint(open), b.open(); got != want {
		t.Errorf("%s: open suspects = %s, want %s", when, got, want)
	}
}

func rollupSuspects(t *testing.T, db storage.Store, limit, want int) {
	t.Helper()
	if n, err := db.RollupSuspects(context.Background(), limit); err != nil || n != want {
		t.Fatalf("roll up %d suspects: %d, %v; want %d", limit, n, err, want)
	}
}

// TestSuspectCounts_Rollup: the suspects' counts and the open suspects per source
// equal a hand count at every step: before any roll-up (every suspect read as the
// tail, as in a database from before the totals), with part of them folded in, all of
// them, and through reviews of suspects folded in and not yet, re-reviews, and a
// review that changes nothing.
func TestSuspectCounts_Rollup(t *testing.T, e Engine) {
	db := e.Open(t)
	newClock(e, db)
	b := newSuspectBook(e, db)
	b.check(t, db, "empty")
	var ids []int64
	for i, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: 1, Source: "ota", Amount: "100.10", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Delivery: 2, Source: "ota", Amount: "20", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Delivery: 3, Source: "psp", Amount: "0.05", Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Delivery: 4, Source: "psp", Amount: "1200", Currency: "JPY"},
		{Kind: storage.SuspectCorrelation, Delivery: 5, Source: "ota", Amount: "1.5", Currency: "KWD"},
		{Kind: storage.SuspectLateDuplicate, Delivery: 6, Source: "ota", Amount: "12.345", Currency: "EUR"}, // unsummed
		{Kind: storage.SuspectLateDuplicate, Delivery: 7, Source: "cm", Amount: "n/a", Currency: "USD"},     // unsummed
		{Kind: storage.SuspectLateDuplicate, Delivery: 8, Source: "cm"},                                     // no amount
		{Kind: storage.SuspectBusinessKey, Delivery: 9, Source: "ota", Amount: "-5.00", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Delivery: 10, Source: "cm", Amount: "3", Currency: "", State: storage.SuspectDismissed},
	} {
		ids = append(ids, b.add(t, s).ID)
		if i == 4 {
			b.check(t, db, "half added, none folded")
		}
	}
	b.check(t, db, "none folded")

	rollupSuspects(t, db, 4, 4)
	b.check(t, db, "four folded")
	b.review(t, db, ids[0], storage.SuspectConfirmed) // folded
	b.check(t, db, "a folded suspect confirmed")
	b.review(t, db, ids[6], storage.SuspectDismissed) // not folded yet
	b.check(t, db, "a suspect after the mark dismissed")
	b.review(t, db, ids[3], storage.SuspectConfirmed) // folded: the last of the stretch
	b.check(t, db, "the mark's suspect confirmed")

	rollupSuspects(t, db, 100, 6)
	rollupSuspects(t, db, 100, 0)
	b.check(t, db, "all folded")
	b.review(t, db, ids[0], storage.SuspectDismissed) // confirmed, now dismissed
	b.check(t, db, "a folded suspect reviewed again")
	b.review(t, db, ids[6], storage.SuspectConfirmed) // reviewed in the tail, folded since
	b.check(t, db, "a suspect reviewed before and after its fold")
	b.review(t, db, ids[6], storage.SuspectConfirmed) // the same verdict again
	b.check(t, db, "the same verdict twice")
	for _, id := range []int64{ids[1], ids[8]} { // ota's business key EUR row: none left open
		b.review(t, db, id, storage.SuspectDismissed)
	}
	b.check(t, db, "a total's every suspect reviewed away")

	more := b.add(t, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: 11, Source: "new", Amount: "7.00", Currency: "EUR"})
	b.add(t, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: 12, Source: "ota", Amount: "1.00", Currency: "EUR"})
	b.check(t, db, "added after the roll-up")
	b.review(t, db, more.ID, storage.SuspectDismissed)
	b.check(t, db, "a new suspect dismissed")
	rollupSuspects(t, db, 100, 2)
	b.check(t, db, "folded again")
	b.check(t, e.Reopen(t, db), "another handle")
}

// TestSuspectCounts_HugeAmounts: amounts whose sum no int64 of minor units holds count
// every suspect of their row as unsummed, as the ledger does; and as a review takes
// one of them out of the row again, the rest is summed exactly again, folded in or
// not.
func TestSuspectCounts_HugeAmounts(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	const huge = "92233720368547758.07" // the largest int64 of cents
	var ids []int64
	for i := range 3 {
		s := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: int64(i + 1), Source: "ota",
			Amount: huge, Currency: "EUR"})
		ids = append(ids, s.ID)
	}
	const all = "business_key open \"EUR\" n=3 minor=0 unsummed=3\n"
	wantSuspectCounts(t, db, "none folded", all)
	rollupSuspects(t, db, 2, 2)
	wantSuspectCounts(t, db, "two folded", all)
	if _, err := db.ReviewSuspect(ctx, ids[0], "olga", storage.SuspectDismissed, "no"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReviewSuspect(ctx, ids[2], "olga", storage.SuspectDismissed, "no"); err != nil {
		t.Fatal(err)
	}
	wantSuspectCounts(t, db, "one folded, one not, dismissed", "business_key dismissed \"EUR\" n=2 minor=0 unsummed=2\n"+
		"business_key open \"EUR\" n=1 minor=9223372036854775807 unsummed=0\n")
	rollupSuspects(t, db, 100, 1)
	if _, err := db.ReviewSuspect(ctx, ids[0], "olga", storage.SuspectOpen+"x", "no"); err == nil {
		t.Fatal("a review to no state was taken")
	}
	if _, err := db.ReviewSuspect(ctx, ids[2], "olga", storage.SuspectConfirmed, "yes"); err != nil {
		t.Fatal(err)
	}
	wantSuspectCounts(t, db, "all folded", "business_key confirmed \"EUR\" n=1 minor=9223372036854775807 unsummed=0\n"+
		"business_key dismissed \"EUR\" n=1 minor=9223372036854775807 unsummed=0\n"+
		"business_key open \"EUR\" n=1 minor=9223372036854775807 unsummed=0\n")
}

// TestSuspectCounts_ReviewsWhileRollingUp: operators review suspects on one handle (a
// replica, or another process) while another rolls them up in small stretches: a
// review that lands between a roll-up's read of a suspect and its write must leave
// the suspect counted once, in its new state. The counts equal the hand count after
// every round.
func TestSuspectCounts_ReviewsWhileRollingUp(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	other := e.Reopen(t, db)
	b := newSuspectBook(e, db)
	const rounds, perRound = 4, 40
	states := []string{storage.SuspectConfirmed, storage.SuspectDismissed}
	for round := range rounds {
		var ids []int64
		for i := range perRound {
			s := b.add(t, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: int64(round*perRound + i + 1),
				Source: []string{"ota", "psp"}[i%2], Amount: fmt.Sprintf("%d.%02d", i, round), Currency: "EUR"})
			ids = append(ids, s.ID)
		}
		var wg sync.WaitGroup
		done := make(chan struct{})
		var rollErr error
		wg.Go(func() {
			for {
				if _, err := db.RollupSuspects(ctx, 3); err != nil {
					rollErr = err
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		// Each suspect reviewed twice, from the newest: some before their fold, some
		// as it happens, some after.
		for pass := range 2 {
			for i := len(ids) - 1; i >= 0; i-- {
				b.review(t, other, ids[i], states[(i+pass+round)%2])
			}
		}
		close(done)
		wg.Wait()
		if rollErr != nil {
			t.Fatal(rollErr)
		}
		b.check(t, db, fmt.Sprintf("round %d", round))
	}
	for {
		n, err := db.RollupSuspects(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	b.check(t, db, "all folded")
	b.check(t, other, "all folded, the other handle")
}

// TestSuspectCounts_CurrencyTableChanged: the running totals hold amounts in minor
// units as the currency table of the build that folded them read them, and a later
// build may read a currency otherwise (an ISO 4217 amendment; HUF, which providers
// send without decimals). Under the other table the counts are what the suspects make
// under it, from the first read on, through reviews of suspects folded under the old
// one and the roll-up that folds them again; and again once the old table is back (a
// build gone back to). Here HUF "1.50" is 150 minor units with two decimals, and no
// whole number of them (unsummed) with none.
func TestSuspectCounts_CurrencyTableChanged(t *testing.T, e Engine) {
	db := e.Open(t)
	newClock(e, db)
	b := newSuspectBook(e, db)
	var ids []int64
	for i := range 4 {
		ids = append(ids, b.add(t, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: int64(i + 1),
			Source: "ota", Amount: "1.50", Currency: "HUF"}).ID)
	}
	b.add(t, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: 5, Source: "psp", Amount: "2.25", Currency: "EUR"})
	rollupSuspects(t, db, 100, 5)
	b.check(t, db, "folded with two decimals")

	// A review under another table, then the old one back (a build gone back to).
	restore := storage.SetCurrencyExponent("HUF", 0)
	b.review(t, db, ids[3], storage.SuspectDismissed)
	restore()
	b.check(t, db, "reviewed without decimals, read with two again")
	rollupSuspects(t, db, 100, 5)
	b.check(t, db, "reviewed without decimals, folded with two again")

	restore = storage.SetCurrencyExponent("HUF", 0)
	defer restore()
	b.check(t, db, "HUF without decimals, before the roll-up")
	b.review(t, db, ids[0], storage.SuspectDismissed) // folded under the old table
	b.check(t, db, "a suspect folded under the old table dismissed")
	rollupSuspects(t, db, 100, 5) // every suspect again, under the new table
	rollupSuspects(t, db, 100, 0)
	b.check(t, db, "folded again without decimals")
	b.review(t, db, ids[1], storage.SuspectConfirmed)
	b.check(t, db, "a suspect folded under the new table confirmed")

	restore()
	b.check(t, db, "HUF with two decimals again")
	b.review(t, db, ids[2], storage.SuspectDismissed)
	rollupSuspects(t, db, 3, 3)
	b.check(t, db, "part folded again with two decimals")
	b.review(t, db, ids[3], storage.SuspectConfirmed)
	rollupSuspects(t, db, 100, 2)
	b.check(t, db, "all folded again with two decimals")
}

// TestSuspectCounts_NoAmount: suspects whose delivery states a currency but carries no
// amount are counted as such, apart from the sum, before the roll-up, folded in,
// through reviews that move them from one state's total to another's, beside a sum
// that no int64 holds (which loses the amounts, not them), and on another handle.
func TestSuspectCounts_NoAmount(t *testing.T, e Engine) {
	db := e.Open(t)
	newClock(e, db)
	b := newSuspectBook(e, db)
	const huge = "92233720368547758.07" // the largest int64 of cents
	var ids []int64
	for i, amount := range []string{"", "", "20.00", "", huge, huge, ""} {
		kind := storage.SuspectBusinessKey
		if i >= 4 {
			kind = storage.SuspectCorrelation
		}
		ids = append(ids, b.add(t, storage.Suspect{Kind: kind, Delivery: int64(i + 1), Source: "ota", Amount: amount, Currency: "EUR"}).ID)
	}
	// The counts are written out rather than taken from the hand count, which sums the
	// huge amounts one at a time where the engines' totals sum them as one
	// (storage.SuspectTotal).
	const open = `business_key open "EUR" n=4 minor=2000 unsummed=0 no_amount=3
correlation open "EUR" n=3 minor=0 unsummed=2 no_amount=1
`
	wantSuspectCounts(t, db, "none folded", open)
	rollupSuspects(t, db, 3, 3)
	wantSuspectCounts(t, db, "three folded", open)
	rollupSuspects(t, db, 100, 4)
	wantSuspectCounts(t, db, "all folded", open)
	b.review(t, db, ids[0], storage.SuspectConfirmed)
	b.review(t, db, ids[1], storage.SuspectDismissed)
	b.review(t, db, ids[6], storage.SuspectDismissed)
	const reviewed = `business_key confirmed "EUR" n=1 minor=0 unsummed=0 no_amount=1
business_key dismissed "EUR" n=1 minor=0 unsummed=0 no_amount=1
business_key open "EUR" n=2 minor=2000 unsummed=0 no_amount=1
correlation dismissed "EUR" n=1 minor=0 unsummed=0 no_amount=1
correlation open "EUR" n=2 minor=0 unsummed=2
`
	wantSuspectCounts(t, db, "reviewed", reviewed)
	wantSuspectCounts(t, e.Reopen(t, db), "another handle", reviewed)
}

// TestSuspectCounts_DeliveryFlaggedTwice: a refund flagged by two correlation rules (or
// twice by one, against two other deliveries) is one refund at stake: its money counts
// once in its kind and state, folded in or not, as reviews move its suspects apart and
// together again. A business key on it counts it in that kind too.
func TestSuspectCounts_DeliveryFlaggedTwice(t *testing.T, e Engine) {
	db := e.Open(t)
	newClock(e, db)
	b := newSuspectBook(e, db)
	var ids []int64
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectCorrelation, Delivery: 1, Source: "psp", Rule: "double-refund", Amount: "182.50", Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Delivery: 1, Source: "psp", Rule: "refund-by-guest", Amount: "182.50", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Delivery: 1, Source: "psp", Amount: "182.50", Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Delivery: 2, Source: "psp", Rule: "double-refund", Amount: "10.00", Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Delivery: 3, Source: "psp", Rule: "double-refund", Currency: "EUR"}, // no amount
		{Kind: storage.SuspectCorrelation, Delivery: 3, Source: "psp", Rule: "refund-by-guest", Currency: "EUR"},
	} {
		ids = append(ids, b.add(t, s).ID)
	}
	wantSuspectCounts(t, db, "none folded", `business_key open "EUR" n=1 minor=18250 unsummed=0
correlation open "EUR" n=3 minor=19250 unsummed=0 no_amount=1 suspects=5
`)
	b.check(t, db, "none folded")
	rollupSuspects(t, db, 100, 6)
	b.check(t, db, "all folded")

	b.review(t, db, ids[0], storage.SuspectConfirmed) // its twin stays open
	b.check(t, db, "one of two folded suspects confirmed")
	b.review(t, db, ids[1], storage.SuspectConfirmed) // together again
	b.check(t, db, "both confirmed")
	b.review(t, db, ids[0], storage.SuspectDismissed)
	b.check(t, db, "apart again")
	b.review(t, db, ids[1], storage.SuspectDismissed)
	b.check(t, db, "both dismissed, together")

	more := b.add(t, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: 2, Source: "psp", Rule: "refund-by-guest", Amount: "10.00", Currency: "EUR"})
	b.check(t, db, "a second flag of a folded delivery, not folded")
	b.review(t, db, ids[3], storage.SuspectDismissed) // folded; its twin after the mark now counts
	b.check(t, db, "the folded flag dismissed, its twin after the mark")
	rollupSuspects(t, db, 100, 1)
	b.check(t, db, "the twin folded")
	b.review(t, db, more.ID, storage.SuspectDismissed)
	b.check(t, db, "the later delivery's both dismissed")
	b.check(t, e.Reopen(t, db), "another handle")
}
