package sqlite

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hookdedup/hookdedup/storage"
)

// The roll-ups (RollupStats, RollupLedger) fold the deliveries after their marks into
// totals. Reading those deliveries back cost them a few microseconds a delivery, about
// a tenth of what intake spends on one, for figures that the writer had at hand when it
// stored them. So the writer keeps them: after each commit it adds what it stored to
// pending totals, in spans of consecutive delivery ids, and a roll-up folds a span
// whole instead of reading its rows. Nothing depends on those totals being there: a
// roll-up reads the rows that no span covers whole, as it always did (a span it meets
// halfway through, the ids another process stored, what was committed before the
// process started or while the spans were full), so a crash, a restart or a span
// dropped costs reading, never a count.
//
// A span is counted as the roll-ups count the rows they read (statsSum.count), from
// the values the writer stored (forensics' changes in the same transaction included).

const (
	// spanRows is how many rows a span takes before the writer starts another: a
	// roll-up whose limit ends inside a span reads that span's rows, so spans stay small.
	spanRows = 64
	// maxSpans bounds the spans held (a few KB each at most): with no roll-up
	// running (a command other than serve), the writer stops adding at this many.
	maxSpans = 4096
)

// statsKey is a row of delivery_stats.
type statsKey struct {
	source, outcome, currency string
	hour                      int64
}

// statsEntry is a row of delivery_stats and what a span adds to it.
type statsEntry struct {
	key statsKey
	sum statsSum
}

// statsSum is what a span, or a stretch read, adds to a row of delivery_stats.
type statsSum struct {
	deliveries, mismatches, moneyMismatches int64
	// money is the amounts, summed as the ledger sums them (storage.Money.AddAmount):
	// its Count is the row's with_amount, its Unsummed the row's unsummed.
	money storage.Money
}

// count adds one delivery to st, as the hourly totals count it.
func (st *statsSum) count(mismatch, moneyMismatch bool, amount, currency string) {
	st.deliveries++
	if mismatch {
		st.mismatches++
	}
	if moneyMismatch {
		st.moneyMismatches++
	}
	if amount != "" {
		st.money.AddAmount(amount, currency)
	}
}

// ledgerKey is a row of ledger_days.
type ledgerKey struct {
	day                    int64
	source, property, curr string
	kind                   string
}

// span is the totals of the deliveries with ids from..to, every one of them.
type span struct {
	from, to int64
	rows     int          // deliveries, for RollupStats' limit
	dups     int          // duplicates, for RollupLedger's limit
	stats    []statsEntry // a few: one per source, hour, outcome and currency
	ledger   map[ledgerKey]storage.Money
	// sealed: a roll-up has it, so the writer adds to it no more.
	sealed bool
}

// pendingTotals is what the writer has stored and the roll-ups have not folded yet.
type pendingTotals struct {
	mu    sync.Mutex
	spans []*span
	// The marks of the two roll-ups as last seen: a span both have passed is dropped.
	statsAt, ledgerAt int64
	// read counts the deliveries the roll-ups read rather than folded.
	read atomic.Int64
}

// add adds the rows of a committed batch: called by the writer, in commit order.
func (p *pendingTotals) add(batch []*recordReq) {
	first, last, n := int64(0), int64(0), 0
	for _, r := range batch {
		for i := range r.rows {
			row := &r.rows[i]
			if n == 0 {
				first = row.id
			}
			last = row.id
			n++
		}
	}
	if n == 0 || last-first+1 != int64(n) {
		return // not consecutive ids: left to be read
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var s *span
	if k := len(p.spans); k > 0 && !p.spans[k-1].sealed && p.spans[k-1].to == first-1 && p.spans[k-1].rows < spanRows {
		s = p.spans[k-1]
	} else {
		if len(p.spans) >= maxSpans {
			return
		}
		s = &span{from: first, ledger: make(map[ledgerKey]storage.Money, spanRows/2)}
		p.spans = append(p.spans, s)
	}
	s.to = last
	for _, r := range batch {
		for i := range r.rows {
			s.count(&r.rows[i])
		}
	}
}

// count adds row to s as the roll-ups' SQL counts a row of deliveries.
func (s *span) count(row *recordRow) {
	d := row.d
	s.rows++
	source := statsSource(row.outcome, d.Status, d.Source)
	currency := ""
	if d.Amount != "" {
		currency = d.Currency
	}
	at := millis(d.ReceivedAt)
	k := statsKey{source: source, outcome: string(row.outcome), currency: currency, hour: at / 3600000}
	var st *statsSum
	for i := range s.stats {
		if s.stats[i].key == k {
			st = &s.stats[i].sum
			break
		}
	}
	if st == nil {
		k.source, k.currency = strings.Clone(k.source), strings.Clone(k.currency)
		s.stats = append(s.stats, statsEntry{key: k})
		st = &s.stats[len(s.stats)-1].sum
	}
	st.count(row.mismatch, row.moneyMismatch, d.Amount, d.Currency)
	if row.outcome != storage.Duplicate {
		return
	}
	s.dups++
	add := func(kind string) {
		k := ledgerKey{day: at / dayMillis, source: d.Source, property: d.Property, curr: d.Currency, kind: kind}
		m, ok := s.ledger[k]
		if !ok {
			k.source, k.property, k.curr = strings.Clone(k.source), strings.Clone(k.property), strings.Clone(k.curr)
		}
		m.AddAmount(d.Amount, d.Currency)
		s.ledger[k] = m
	}
	if d.Amount != "" {
		add(storage.LedgerCaught)
	}
	if row.moneyMismatch {
		add(storage.LedgerMoneyMismatch)
	}
}

// noBound is the upto of a read with no upper bound.
const noBound = -1

// readFunc reads the rows with ids in (after, upto] (upto noBound: all after), at most
// limit of them as a roll-up counts them, into the roll-up's totals. It returns how
// many it counted and the id of the last one (0 if none).
type readFunc func(after, upto int64, limit int) (n int, last int64, err error)

// walk counts, into a roll-up's totals, up to limit deliveries (duplicates for the
// ledger) after mark, in id order: each span that starts where the count has got to and
// fits in what is left of limit is folded whole (fold), the rest is read (read). It
// returns how many it counted and the mark that they take the roll-up to.
func (p *pendingTotals) walk(mark int64, limit int, ledger bool, readRows readFunc, fold func(*span)) (int, int64, error) {
	read := func(after, upto int64, limit int) (int, int64, error) {
		n, last, err := readRows(after, upto, limit)
		p.read.Add(int64(n))
		return n, last, err
	}
	n, pos := 0, mark
	for _, s := range p.cover(mark, ledger) {
		if n >= limit {
			return n, pos, nil
		}
		if s.from > pos+1 { // a stretch no span covers: read it
			k, last, err := read(pos, s.from-1, limit-n)
			if err != nil {
				return 0, 0, err
			}
			if n += k; n >= limit {
				return n, last, nil
			}
			pos = s.from - 1
		}
		weight := s.rows
		if ledger {
			weight = s.dups
		}
		if n+weight > limit { // the limit ends inside the span: read up to it
			k, last, err := read(pos, s.to, limit-n)
			if err != nil {
				return 0, 0, err
			}
			if n += k; n >= limit {
				return n, last, nil
			}
			return n, s.to, nil
		}
		fold(s)
		n, pos = n+weight, s.to
	}
	if n >= limit {
		return n, pos, nil
	}
	k, last, err := read(pos, noBound, limit-n)
	if err != nil {
		return 0, 0, err
	}
	if k > 0 {
		pos = last
	}
	return n + k, pos, nil
}

// cover returns the spans, in order, that start after mark, sealed, and drops those
// that both roll-ups have passed. ledger says which roll-up asks, at mark.
func (p *pendingTotals) cover(mark int64, ledger bool) []*span {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passed(mark, ledger)
	var out []*span
	for _, s := range p.spans {
		if s.from > mark {
			s.sealed = true
			out = append(out, s)
		}
	}
	return out
}

// passed notes that a roll-up's mark is at mark, and drops the spans both have passed.
// p.mu is held.
func (p *pendingTotals) passed(mark int64, ledger bool) {
	if ledger {
		p.ledgerAt = max(p.ledgerAt, mark)
	} else {
		p.statsAt = max(p.statsAt, mark)
	}
	// A span without duplicates is nothing to the ledger, whose mark moves only past
	// duplicates.
	i := 0
	for i < len(p.spans) && p.spans[i].to <= p.statsAt && (p.spans[i].to <= p.ledgerAt || p.spans[i].dups == 0) {
		i++
	}
	if i > 0 {
		p.spans = append(p.spans[:0], p.spans[i:]...)
	}
}

// moved notes that a roll-up moved its mark to mark.
func (p *pendingTotals) moved(mark int64, ledger bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passed(mark, ledger)
}
