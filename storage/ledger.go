package storage

import (
	"cmp"
	"maps"
	"math"
	"math/big"
	"slices"
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
	neg, whole, frac, ok := plainDecimal(amount)
	if !ok {
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

// MoneyMinor is amount, in major units of currency, as the ledger, the suspects' money
// at stake and every other sum of money at risk count it: in minor units by its
// magnitude, as MinorUnits reads it (ok false likewise). Sources write a refund as
// "-182.50" or as "182.50", and a duplicate refund of 50.00 is 50.00 at risk whichever
// they chose: summed with their signs, a refund and a charge of one amount would put
// 0.00 at risk. Correlation rules compare amounts without their sign too.
func MoneyMinor(amount, currency string) (minor int64, ok bool) {
	n, ok := MinorUnits(amount, currency)
	if n < 0 {
		n = -n // MinorUnits negates what it read as digits: never math.MinInt64
	}
	return n, ok
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
// their amounts summed exactly in minor units of the row's currency. Each is summed in
// Minor, or counted in Unsummed or NoAmount.
type Money struct {
	Count int64
	Minor int64 // the exact amounts summed, in minor units
	// Unsummed counts those whose amount is no exact number of minor units (text, or a
	// fraction of a cent): counted in Count, left out of Minor.
	Unsummed int64
	// NoAmount counts those that carried no amount at all: counted in Count, adding
	// nothing to Minor. Kept apart so that money not known is never read as a sum of
	// zero: a cell of such deliveries alone is no refund of 0.00.
	NoAmount int64
}

// SumLost is m when no int64 holds its sum: every one that carried an amount is
// counted as unsummed, those that carried none stay counted as such (no sum lost
// them), and Minor is 0.
func (m Money) SumLost() Money {
	return Money{Count: m.Count, Unsummed: m.Count - m.NoAmount, NoAmount: m.NoAmount}
}

// SplitSum is m with the sum of its amounts in minor units, high × 1,000,000,000 + low,
// as the engines sum the two parts apart so that no part overflows (SuspectTotal.Add):
// SumLost when no int64 holds it.
func (m Money) SplitSum(high, low int64) Money {
	sum := new(big.Int).Mul(big.NewInt(high), big.NewInt(minorSplit))
	if sum.Add(sum, big.NewInt(low)); !sum.IsInt64() {
		return m.SumLost()
	}
	m.Minor = sum.Int64()
	return m
}

// Add adds o to m.
func (m *Money) Add(o Money) {
	m.Count += o.Count
	m.NoAmount += o.NoAmount
	if addOverflows(m.Minor, o.Minor) {
		// No int64 holds the sum: o's amounts are counted, left out of it.
		m.Unsummed += o.SumLost().Unsummed
		return
	}
	m.Minor += o.Minor
	m.Unsummed += o.Unsummed
}

// AddAmount counts one delivery or suspect of amount (major units, "" for none), by its
// magnitude (MoneyMinor).
func (m *Money) AddAmount(amount, currency string) {
	m.Count++
	if amount == "" {
		m.NoAmount++
		return
	}
	if n, ok := MoneyMinor(amount, currency); ok && !addOverflows(m.Minor, n) {
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
	// Caught: duplicates that carried an amount (a plain decimal or not), blocked (not
	// handed downstream).
	Caught Money
	// MoneyMismatch: duplicates whose amount, currency or status differed from the
	// first delivery's, whether or not they carried an amount; blocked too (also in
	// Caught when they carried one), and at risk: the delivery handed downstream may
	// not be the one that counts.
	MoneyMismatch Money
	// The open suspects of each kind, whether or not their delivery carried an amount:
	// accepted and handed downstream, not reviewed yet.
	BusinessKey, Correlation, LateDuplicate Money
	// Confirmed: the deliveries an operator confirmed as doubles, of every kind, each
	// once however many of its suspects were confirmed.
	Confirmed Money

	// Overlap is what the open suspects of each kind count more than once: the second
	// and later open suspects of one delivery, whose money is at risk only once.
	Overlap Money
	// RiskConfirmed is the deliveries both at risk (an open suspect) and confirmed (a
	// confirmed one): counted in AtRisk and in Confirmed alike, and once in Deliveries.
	RiskConfirmed Money
}

// Deliveries is the row's deliveries at risk or confirmed, each once: a delivery with
// an open suspect and a confirmed one is one delivery, whose money is counted once.
func (r LedgerRow) Deliveries() Money {
	return netMoney([]Money{r.MoneyMismatch, r.BusinessKey, r.Correlation, r.LateDuplicate, r.Confirmed},
		r.Overlap, r.RiskConfirmed)
}

// AtRisk is the row's money at risk: money mismatches and the deliveries of open
// suspects, each delivery once, however many kinds flag it.
func (r LedgerRow) AtRisk() Money {
	return netMoney([]Money{r.MoneyMismatch, r.BusinessKey, r.Correlation, r.LateDuplicate}, r.Overlap)
}

// netMoney is the sum of add less the sum of sub, what add counts twice. The sums are
// taken exactly, then written as a Money: adding one by one would leave an amount
// unsummed when a partial sum passes the int64 and still take it away again with sub,
// making a sum of no deliveries. A result that no int64 holds is SumLost.
func netMoney(add []Money, sub ...Money) Money {
	var m Money
	minor, n := new(big.Int), new(big.Int)
	for _, o := range add {
		m.Count, m.Unsummed, m.NoAmount = m.Count+o.Count, m.Unsummed+o.Unsummed, m.NoAmount+o.NoAmount
		minor.Add(minor, n.SetInt64(o.Minor))
	}
	for _, o := range sub {
		m.Count, m.Unsummed, m.NoAmount = m.Count-o.Count, m.Unsummed-o.Unsummed, m.NoAmount-o.NoAmount
		minor.Sub(minor, n.SetInt64(o.Minor))
	}
	if !minor.IsInt64() {
		return m.SumLost()
	}
	m.Minor = minor.Int64()
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
	r.RiskConfirmed.Add(o.RiskConfirmed)
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

// LedgerDayMillis is the length of a ledger day in Unix milliseconds: both engines
// number days as received_at or flagged_at divided by it, in SQL and here alike.
const LedgerDayMillis = 24 * 60 * 60 * 1000

// The kinds of the engines' daily ledger totals (ledger_days and ledger_totals): the
// engines write them and LedgerBuilder reads them, so both spell them the same.
const (
	LedgerCaught        = "caught"
	LedgerMoneyMismatch = "money_mismatch"
)

// LedgerDays is the range of ledger days, from included and to excluded, that f's From
// and To select: a To within a day includes that day, and a zero bound is unbounded
// (the extreme day whose milliseconds still fit an int64, so that engines can multiply
// it back).
func LedgerDays(f LedgerFilter) (from, to int64) {
	from, to = dayOf(f.From, math.MinInt64/LedgerDayMillis), dayOf(f.To, math.MaxInt64/LedgerDayMillis)
	if !f.To.IsZero() && f.To.UnixMilli()%LedgerDayMillis != 0 {
		to++
	}
	return from, to
}

// dayOf is the day (UTC) of t as the engines number it, rounding down before the epoch
// too; a zero t is zero.
func dayOf(t time.Time, zero int64) int64 {
	if t.IsZero() {
		return zero
	}
	ms := t.UnixMilli()
	d := ms / LedgerDayMillis
	if ms < 0 && ms%LedgerDayMillis != 0 {
		d--
	}
	return d
}

// CompareCurrency orders currency codes byte by byte, no currency ("") last: the
// ledger's and the review's order, on every engine.
func CompareCurrency(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return cmp.Compare(a, b)
}

// LedgerKey is a ledger row's place, as an engine reads it from SQL: Day is the
// number of the day (Unix milliseconds / LedgerDayMillis).
type LedgerKey struct {
	Day                        int64
	Source, Property, Currency string
}

// compareLedgerKeys is the order of ledger rows: newest day first, then source,
// property and currency (no currency last), text byte by byte. The engines read their
// daily rows in this order (PostgreSQL with COLLATE "C"), so that the builder can merge
// its own rows in without reading them all.
func compareLedgerKeys(a, b LedgerKey) int {
	return cmp.Or(cmp.Compare(b.Day, a.Day), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Property, b.Property),
		CompareCurrency(a.Currency, b.Currency))
}

func (k LedgerKey) row() *LedgerRow {
	return &LedgerRow{Day: time.UnixMilli(k.Day * LedgerDayMillis).UTC(), Source: k.Source, Property: k.Property, Currency: k.Currency}
}

// addKind adds m, the daily totals of one kind, to r.
func addKind(r *LedgerRow, kind string, m Money) {
	switch kind {
	case LedgerCaught:
		r.Caught.Add(m)
	case LedgerMoneyMismatch:
		r.MoneyMismatch.Add(m)
	}
}

// LedgerBuilder puts a Ledger together from what an engine reads in one snapshot, so
// that the engines differ only in their SQL, not in how rows are merged, ordered,
// limited and totalled. An engine feeds it, in this order: the few rows that are not in
// its daily totals yet (Duplicate, Suspect), its totals per currency (Total, at any
// time before Result), then its daily totals in the ledger's order (DayTotal) until
// DayTotal says it has enough; Result gives the Ledger.
type LedgerBuilder struct {
	limit int
	// The rows that are not in the daily totals: duplicates not folded in yet, and
	// suspects; few, so all of them are kept, to be merged into the daily rows.
	extra map[LedgerKey]*LedgerRow
	// extraKeys are extra's keys in the ledger's order, not merged yet; nil until the
	// daily rows begin.
	extraKeys []LedgerKey
	merging   bool
	// One delivery may carry several suspects (a re-send under a new id that a
	// correlation rule finds too); its money is at risk, or confirmed, once.
	open, confirmed map[int64]bool
	// openOfKind: the deliveries counted in each kind's cell, each once.
	openOfKind map[kindDelivery]bool
	totals     map[string]*LedgerRow
	// cur is the daily row being summed, kind by kind.
	cur    *LedgerRow
	curKey LedgerKey
	rows   []LedgerRow
}

// NewLedgerBuilder returns a builder of a Ledger of at most limit rows (0: all of them).
func NewLedgerBuilder(limit int) *LedgerBuilder {
	return &LedgerBuilder{
		limit:      limit,
		extra:      map[LedgerKey]*LedgerRow{},
		open:       map[int64]bool{},
		confirmed:  map[int64]bool{},
		openOfKind: map[kindDelivery]bool{},
		totals:     map[string]*LedgerRow{},
	}
}

// kindDelivery is a delivery's place in one kind's cell.
type kindDelivery struct {
	kind     SuspectKind
	delivery int64
}

func (b *LedgerBuilder) extraRow(k LedgerKey) *LedgerRow {
	if b.merging {
		// The daily rows are merged with the extra ones as they come: a row added
		// later would be missed or put out of order.
		panic("storage: LedgerBuilder: a duplicate or suspect after the daily totals")
	}
	r := b.extra[k]
	if r == nil {
		r = k.row()
		b.extra[k] = r
	}
	return r
}

// Duplicate counts a duplicate that the daily totals do not hold yet: caught when it
// carried an amount, and a money mismatch when moneyMismatch.
func (b *LedgerBuilder) Duplicate(k LedgerKey, amount string, moneyMismatch bool) {
	r := b.extraRow(k)
	if amount != "" {
		r.Caught.AddAmount(amount, k.Currency)
	}
	if moneyMismatch {
		r.MoneyMismatch.AddAmount(amount, k.Currency)
	}
}

// Suspect counts a suspect of kind in state (open or confirmed) on delivery: a
// confirmed delivery once, an open one once in its kind's cell, and the open suspects
// of one delivery in a second and later kind as Overlap too, so that its money is at risk once; a delivery both open and confirmed
// in RiskConfirmed as well.
func (b *LedgerBuilder) Suspect(k LedgerKey, kind SuspectKind, state, amount string, delivery int64) {
	r := b.extraRow(k)
	both := b.open[delivery] && b.confirmed[delivery]
	defer func() {
		if !both && b.open[delivery] && b.confirmed[delivery] {
			r.RiskConfirmed.AddAmount(amount, k.Currency)
		}
	}()
	if state == SuspectConfirmed {
		if !b.confirmed[delivery] {
			b.confirmed[delivery] = true
			r.Confirmed.AddAmount(amount, k.Currency)
		}
	} else if m := r.Open(kind); m != nil && !b.openOfKind[kindDelivery{kind, delivery}] {
		// A kind's cell counts deliveries, as its link lists them: two rules of one
		// kind that flag one refund are one refund.
		b.openOfKind[kindDelivery{kind, delivery}] = true
		m.AddAmount(amount, k.Currency)
		if b.open[delivery] {
			r.Overlap.AddAmount(amount, k.Currency)
		}
		b.open[delivery] = true
	}
}

func (b *LedgerBuilder) total(currency string) *LedgerRow {
	t := b.totals[currency]
	if t == nil {
		t = &LedgerRow{Currency: currency}
		b.totals[currency] = t
	}
	return t
}

// Total adds m, the engine's daily totals of kind in currency summed over the filter's
// days, to the Ledger's totals; the rows of Duplicate and Suspect are added by Result.
func (b *LedgerBuilder) Total(currency, kind string, m Money) {
	addKind(b.total(currency), kind, m)
}

// full says that the rows hold one past the limit: that one says that there are more.
func (b *LedgerBuilder) full() bool { return b.limit > 0 && len(b.rows) > b.limit }

// emit adds r, the daily row at k (nil for none), after the extra rows before it, and
// with the extra row at k merged in.
func (b *LedgerBuilder) emit(r *LedgerRow, k LedgerKey) {
	for len(b.extraKeys) > 0 && compareLedgerKeys(b.extraKeys[0], k) <= 0 && !b.full() {
		ek := b.extraKeys[0]
		b.extraKeys = b.extraKeys[1:]
		if ek == k {
			r.Add(*b.extra[ek])
			continue
		}
		b.rows = append(b.rows, *b.extra[ek])
	}
	if r != nil && !b.full() {
		b.rows = append(b.rows, *r)
	}
}

func (b *LedgerBuilder) startMerge() {
	if !b.merging {
		b.merging = true
		b.extraKeys = slices.SortedFunc(maps.Keys(b.extra), compareLedgerKeys)
	}
}

// DayTotal adds m, one kind of the daily totals at k, to the rows. The engine must give
// them in the ledger's order (newest day first, then source, property and currency, no
// currency last, byte by byte), and stop reading when DayTotal returns false: the
// rows are full, and the rest is not read at all.
func (b *LedgerBuilder) DayTotal(k LedgerKey, kind string, m Money) bool {
	b.startMerge()
	if b.cur == nil || k != b.curKey {
		if b.cur != nil {
			b.emit(b.cur, b.curKey)
		}
		b.cur, b.curKey = k.row(), k
	}
	addKind(b.cur, kind, m)
	return !b.full()
}

// Result is the Ledger: the rows, extra ones merged in, up to the limit (More when rows
// were left out), and the totals per currency with every extra row in them, whether or
// not its row was left out. Call it once, after the last DayTotal.
func (b *LedgerBuilder) Result() Ledger {
	b.startMerge()
	var out Ledger
	for _, r := range b.extra {
		b.total(r.Currency).Add(*r)
	}
	for _, t := range b.totals {
		out.Totals = append(out.Totals, *t)
	}
	slices.SortFunc(out.Totals, func(a, b LedgerRow) int { return CompareCurrency(a.Currency, b.Currency) })

	if b.cur != nil {
		b.emit(b.cur, b.curKey)
		b.cur = nil
	}
	for len(b.extraKeys) > 0 && !b.full() {
		b.rows = append(b.rows, *b.extra[b.extraKeys[0]])
		b.extraKeys = b.extraKeys[1:]
	}
	out.Rows = b.rows
	if b.full() {
		out.Rows, out.More = out.Rows[:b.limit], true
	}
	return out
}

// SignedFix is what amount, a duplicate's, lacks in a total that an earlier version
// summed with its sign (the ledger's daily totals, the dashboard's hourly ones) to count
// there by its magnitude, as MoneyMinor counts it. For the ledger, minor is the
// magnitude of a negative amount in minor units of currency (minorOK when the ledger
// summed it: MinorUnits reads it), which a LedgerMend adds up; for the dashboard, real
// is twice its magnitude as a float (realOK when the dashboard summed it: a
// PlainAmount). Both are false for an amount that is not negative: it was summed as it
// counts.
func SignedFix(amount, currency string) (minor int64, minorOK bool, real float64, realOK bool) {
	if !strings.HasPrefix(amount, "-") {
		return 0, false, 0, false
	}
	if n, ok := MinorUnits(amount, currency); ok && n < 0 {
		minor, minorOK = -n, true // MinorUnits negates what it read as digits: never math.MinInt64
	}
	if PlainAmount(amount) {
		if v, err := strconv.ParseFloat(amount, 64); err == nil && v < 0 {
			real, realOK = -2*v, true
		}
	}
	return minor, minorOK, real, realOK
}

// LedgerMend adds up the negative amounts of one daily ledger total that an earlier
// version summed with their signs (SignedFix's minor), to count them there by their
// magnitude. Their sum is kept exactly: twice a few large amounts overflows an int64 though the
// total they make fits, and a sum wrapped around would be money never sent.
type LedgerMend struct {
	magnitude big.Int
	count     int64
}

// Add counts one negative amount of magnitude minor.
func (m *LedgerMend) Add(minor int64) {
	m.magnitude.Add(&m.magnitude, big.NewInt(minor))
	m.count++
}

// Apply is the total (amount, unsummed: a ledger_days or ledger_totals row of deliveries
// that carried an amount, withAmount) counted by magnitude: amount with the mended
// amounts' signs turned. A total that no int64 holds then is treated as a roll-up treats
// one: the mended amounts are taken out of the sum and counted as unsummed (never more
// than the row's amounts), and should even that not fit, the sum is left as it was.
func (m *LedgerMend) Apply(amount, unsummed, withAmount int64) (int64, int64) {
	twice := new(big.Int).Lsh(&m.magnitude, 1)
	if sum := twice.Add(twice, big.NewInt(amount)); sum.IsInt64() {
		return sum.Int64(), unsummed
	}
	unsummed = min(unsummed+m.count, max(withAmount, unsummed))
	if sum := new(big.Int).Add(&m.magnitude, big.NewInt(amount)); sum.IsInt64() {
		return sum.Int64(), unsummed
	}
	return amount, unsummed
}

// LedgerMends gathers, from the duplicates an earlier version summed with their signs
// (Add, one each), what each stored total lacks to count them by their magnitude: the
// ledger's daily totals by property (Days) and by source alone (Totals, Property ""),
// for the duplicates folded up to LedgerMark, and the dashboard's hourly totals of
// duplicates (Hours, twice each negative amount as a float), for those folded up to
// StatsMark. The engines read the duplicates and write the totals; what a duplicate
// adds where is decided here, once.
type LedgerMends struct {
	LedgerMark, StatsMark int64
	Days, Totals          map[LedgerMendKey]*LedgerMend
	Hours                 map[HourMendKey]float64
}

// LedgerMendKey names a daily ledger total.
type LedgerMendKey struct {
	Day                              int64
	Source, Property, Currency, Kind string
}

// HourMendKey names an hourly total of duplicates.
type HourMendKey struct {
	Hour             int64
	Source, Currency string
}

// NewLedgerMends returns an empty LedgerMends for the roll-ups' marks.
func NewLedgerMends(ledgerMark, statsMark int64) *LedgerMends {
	return &LedgerMends{LedgerMark: ledgerMark, StatsMark: statsMark,
		Days: map[LedgerMendKey]*LedgerMend{}, Totals: map[LedgerMendKey]*LedgerMend{}, Hours: map[HourMendKey]float64{}}
}

// Add counts one duplicate (its id, receipt time in Unix milliseconds, amount as
// stored, and whether it was a money mismatch, which the ledger counts under that kind
// too).
func (m *LedgerMends) Add(id, receivedAt int64, source, property, currency, amount string, moneyMismatch bool) {
	minor, minorOK, real, realOK := SignedFix(amount, currency)
	if minorOK && id <= m.LedgerMark {
		day := receivedAt / LedgerDayMillis
		kinds := []string{LedgerCaught}
		if moneyMismatch {
			kinds = append(kinds, LedgerMoneyMismatch)
		}
		for _, kind := range kinds {
			addMend(m.Days, LedgerMendKey{day, source, property, currency, kind}, minor)
			addMend(m.Totals, LedgerMendKey{day, source, "", currency, kind}, minor)
		}
	}
	if realOK && id <= m.StatsMark {
		m.Hours[HourMendKey{receivedAt / 3600000, source, currency}] += real
	}
}

// addMend counts minor in the total k of to.
func addMend(to map[LedgerMendKey]*LedgerMend, k LedgerMendKey, minor int64) {
	if to[k] == nil {
		to[k] = &LedgerMend{}
	}
	to[k].Add(minor)
}
