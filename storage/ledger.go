package storage

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// MinorUnits turns amount, in major units of currency as deliveries and suspects keep
// it ("412.50"), into a whole number of minor units (41250), exactly: no float is
// involved. ok is false when amount is no plain decimal number (an optional "-", digits,
// optionally "." and digits), when it has more decimals than the currency has (a
// fraction of a cent is no amount that can be summed exactly), or when it is too large.
func MinorUnits(amount, currency string) (minor int64, ok bool) {
	neg, digits := false, amount
	if rest, cut := strings.CutPrefix(digits, "-"); cut {
		neg, digits = true, rest
	}
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || (dot && (frac == "" || !allDigits(frac))) {
		return 0, false
	}
	exp := CurrencyExponent(currency)
	frac = strings.TrimRight(frac, "0")
	if len(frac) > exp {
		return 0, false
	}
	n, err := strconv.ParseInt(whole+frac+strings.Repeat("0", exp-len(frac)), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// FormatMinor writes minor, a whole number of minor units of currency, in its major
// units with the currency's decimals and no separators: 41250 EUR is "412.50", 1200 JPY
// is "1200", 1500 KWD is "1.500".
func FormatMinor(minor int64, currency string) string {
	exp := CurrencyExponent(currency)
	neg := minor < 0
	u := uint64(minor)
	if neg {
		u = uint64(-minor) // two's complement: right for math.MinInt64 too
	}
	s := strconv.FormatUint(u, 10)
	if exp > 0 {
		if len(s) <= exp {
			s = strings.Repeat("0", exp-len(s)+1) + s
		}
		s = s[:len(s)-exp] + "." + s[len(s)-exp:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Money is the deliveries or suspects of one kind in one ledger row: how many, and
// their amounts summed exactly in minor units of the row's currency.
type Money struct {
	Count int64
	Minor int64 // the exact amounts summed, in minor units
	// Unsummed counts those whose amount is no exact number of minor units (text, or a
	// fraction of a cent): counted in Count, left out of Minor.
	Unsummed int64
}

// Add adds o to m.
func (m *Money) Add(o Money) {
	m.Count += o.Count
	if addOverflows(m.Minor, o.Minor) {
		// No int64 holds the sum: o's amounts are counted, left out of it.
		m.Unsummed += o.Count
		return
	}
	m.Minor += o.Minor
	m.Unsummed += o.Unsummed
}

// AddAmount counts one delivery or suspect of amount (major units, "" for none).
func (m *Money) AddAmount(amount, currency string) {
	m.Count++
	if amount == "" {
		return
	}
	if n, ok := MinorUnits(amount, currency); ok && !addOverflows(m.Minor, n) {
		m.Minor += n
	} else {
		m.Unsummed++
	}
}

// LedgerRow is the money of one day (UTC), source, property and currency: what
// duplicates moved that intake blocked (caught), and what is at risk: money mismatches
// and open suspects by kind. Amounts are in minor units of Currency; sums are never
// taken across currencies.
type LedgerRow struct {
	Day      time.Time // midnight UTC
	Source   string
	Property string
	Currency string // "" for amounts whose source reads no currency
	// Caught: duplicates that carried an amount, blocked (not handed downstream).
	Caught Money
	// MoneyMismatch: duplicates whose amount, currency or status differed from the
	// first delivery's; blocked too (also in Caught when they carried an amount), and
	// at risk: the delivery handed downstream may not be the one that counts.
	MoneyMismatch Money
	// The open suspects of each kind: accepted and handed downstream, not reviewed yet.
	BusinessKey, Correlation, LateDuplicate Money
	// Confirmed: the deliveries an operator confirmed as doubles, of every kind, each
	// once however many of its suspects were confirmed.
	Confirmed Money

	// Overlap is what the open suspects of each kind count more than once: the second
	// and later open suspects of one delivery, whose money is at risk only once.
	Overlap Money
}

// AtRisk is the row's money at risk: money mismatches and the deliveries of open
// suspects, each delivery once, however many kinds flag it.
func (r LedgerRow) AtRisk() Money {
	m := r.MoneyMismatch
	m.Add(r.BusinessKey)
	m.Add(r.Correlation)
	m.Add(r.LateDuplicate)
	m.Count -= r.Overlap.Count
	m.Minor -= r.Overlap.Minor
	m.Unsummed -= r.Overlap.Unsummed
	return m
}

// Open returns the row's open suspects of kind.
func (r *LedgerRow) Open(kind SuspectKind) *Money {
	switch kind {
	case SuspectBusinessKey:
		return &r.BusinessKey
	case SuspectCorrelation:
		return &r.Correlation
	case SuspectLateDuplicate:
		return &r.LateDuplicate
	}
	return nil
}

// Add adds o's money to r's.
func (r *LedgerRow) Add(o LedgerRow) {
	r.Caught.Add(o.Caught)
	r.MoneyMismatch.Add(o.MoneyMismatch)
	r.BusinessKey.Add(o.BusinessKey)
	r.Correlation.Add(o.Correlation)
	r.LateDuplicate.Add(o.LateDuplicate)
	r.Confirmed.Add(o.Confirmed)
	r.Overlap.Add(o.Overlap)
}

// LedgerFilter selects the ledger's rows. Empty fields match everything.
type LedgerFilter struct {
	Source, Property string
	Currency         string // "" matches every currency, amounts of none included
	// From and To bound the days, From's day included and To's excluded (UTC); zero
	// is unbounded.
	From, To time.Time
	// Limit bounds the rows returned, newest days first (0: all of them); the totals
	// cover every row.
	Limit int
}

// Ledger is the ledger's rows for a filter, newest day first, then by source,
// property and currency, and their totals per currency.
type Ledger struct {
	Rows []LedgerRow
	// Totals has one row per currency (Day, Source and Property empty), in the order of
	// the codes, amounts of no currency last.
	Totals []LedgerRow
	// More says that rows past the Limit were left out.
	More bool
}

func addOverflows(a, b int64) bool {
	return (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b)
}
