package storage

import (
	"strconv"
	"time"
)

// StatBucket is the deliveries of one source and outcome in one period, and of one
// currency: amounts are summed per currency, never across currencies.
type StatBucket struct {
	Source     string
	Start      time.Time // the period's start
	Outcome    Outcome
	Currency   string // of Amount: a Delivery's Currency; "" for none (and for counts without an amount)
	Deliveries int64
	Mismatches int64
	// MoneyMismatches are the Mismatches whose amount, currency or status differs.
	MoneyMismatches int64
	WithAmount      int64 // deliveries that carried an amount
	// Minor is their amounts summed exactly in minor units of Currency, each by its
	// magnitude (MoneyMinor), as the ledger sums money caught: the dashboard's money
	// caught and the ledger's are one figure, to the minor unit.
	Minor int64
	// Unsummed counts the WithAmount left out of Minor, by the ledger's rule: an amount
	// that is no whole number of minor units ("1.234,56", "n/a", JPY "100.5"), or one
	// that no int64 sum holds. A number read off the start of such text, or a fraction
	// of a cent rounded away, would be a sum of money that was never sent.
	Unsummed int64
}

// Money is b's amounts as the ledger counts money: WithAmount, Minor and Unsummed.
func (b StatBucket) Money() Money {
	return Money{Count: b.WithAmount, Minor: b.Minor, Unsummed: b.Unsummed}
}

// StatusUnknownSource is the HTTP status of a rejection whose source name is no
// configured source's: intake answers 404 to a name it does not know, and to nothing
// else. The dashboard's hourly totals count all such names together, under the source
// "" (UnknownSources), as the rejections counted past a minute's named bound already
// are: whoever reaches the port can ask for new names without end, and the totals are
// kept for good. The deliveries and the counts of RejectionsNotStored, swept after
// retention, keep each name.
const StatusUnknownSource = 404

// UnknownSources is the source under which the hourly totals (DeliveryStats) count the
// rejections of names that no source has.
const UnknownSources = ""

// StatsHourKey names an hourly total of duplicates, as the migrations that count the
// totals again from the stored deliveries read them.
type StatsHourKey struct {
	Source, Currency string
	Hour             int64 // received_at / 3600000
}

// StatsHours are the duplicates' amounts of hourly totals counted again from the
// deliveries still stored, each as the roll-ups count it (Money.AddAmount).
type StatsHours map[StatsHourKey]*Money

// Add counts a duplicate of amount (not "") in the hour k.
func (h StatsHours) Add(k StatsHourKey, amount string) {
	m := h[k]
	if m == nil {
		m = &Money{}
		h[k] = m
	}
	m.AddAmount(amount, k.Currency)
}

// StatsMinorFromReal is an hourly total that an earlier version summed as a float in
// major units of currency (real, of withAmount amounts, unsummed of them left out), as
// exact minor units: rounded to the nearest one (a tie to the even one), what the
// float's own rounding already blurred kept as it was. A float that no int64 of minor
// units holds makes every amount of the total unsummed, as a ledger's sum that no int64
// holds is counted.
func StatsMinorFromReal(real float64, currency string, withAmount, unsummed int64) (int64, int64) {
	if real == 0 {
		return 0, unsummed
	}
	minor, ok := MinorUnits(strconv.FormatFloat(real, 'f', CurrencyExponent(currency), 64), currency)
	if !ok {
		return 0, max(withAmount, unsummed)
	}
	return minor, unsummed
}
