package storage

import (
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
	WithAmount      int64   // deliveries that carried an amount
	Amount          float64 // their amounts summed by magnitude, in major units of Currency
	// Unsummed counts the WithAmount whose amount is no PlainAmount ("1.234,56",
	// "n/a"), left out of Amount: a number read off the start of such text would be a
	// sum of money that was never sent.
	Unsummed int64
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
