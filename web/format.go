package web

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// shortTime is a receipt time at a glance: the time of day today, the date otherwise.
func (s *Server) shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	t = t.In(s.loc)
	now := s.now().In(s.loc)
	switch {
	case t.Year() == now.Year() && t.YearDay() == now.YearDay():
		return t.Format("15:04:05")
	case t.Year() == now.Year():
		return t.Format("Jan 2 15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// fullTime is a time in full, with its zone.
func (s *Server) fullTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(s.loc).Format("2006-01-02 15:04:05 MST")
}

// ago says how long ago t was, roughly.
func (s *Server) ago(t time.Time) string {
	d := s.now().Sub(t)
	switch {
	case d < 0:
		return "in " + roughDuration(-d)
	case d < time.Minute:
		return "just now"
	}
	return roughDuration(d) + " ago"
}

func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " days"
}

// humanDuration writes a configured duration the way people say it: 24h, 30m, 7d.
func humanDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d == 24*time.Hour:
		return "1 day"
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + " h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return d.String()
}

// sizeText writes a number of bytes in the largest binary unit that divides it: "4 MiB",
// "16 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// noCurrency stands for the currency of amounts whose source reads none (and of those
// stored before currencies were).
const noCurrency = "—"

// currencyOrder is the order sums by currency are shown in: by code, the amounts of no
// known currency ("") last.
func currencyOrder[V any](byCurrency map[string]V) []string {
	codes := slices.Sorted(maps.Keys(byCurrency))
	if len(codes) > 0 && codes[0] == "" {
		codes = append(codes[1:], "")
	}
	return codes
}

// currencyLabel names the currency code of a sum, noCurrency for amounts without one.
func currencyLabel(code string) string {
	if code == "" {
		return noCurrency
	}
	return code
}

// amountText is a delivery's amount as lists show it: in its currency when it has one
// ("EUR 182.50"), as stored otherwise.
func amountText(d storage.Delivery) string {
	if d.Amount == "" || d.Currency == "" {
		return d.Amount
	}
	return d.Currency + " " + d.Amount
}

// shortKey keeps a key readable in a table: derived keys are long hashes.
func shortKey(k string) string {
	if h, ok := strings.CutPrefix(k, "derived:"); ok && len(h) > 12 {
		return "derived:" + cutAt(h, 12) + "…"
	}
	if len(k) > 40 {
		return cutAt(k, 40) + "…"
	}
	return k
}

// cutAt returns at most the first n bytes of s, ending on a character boundary so that
// the cut does not show as a broken byte.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func eventURL(id int64) string { return "/events/" + strconv.FormatInt(id, 10) }

// keyEventsURL lists every delivery of one source's key.
func keyEventsURL(source, key string) string {
	return "/events?" + url.Values{"source": {source}, "key": {key}}.Encode()
}

func (s *Server) eventRow(d storage.Delivery) views.EventRow {
	return views.EventRow{
		ID:            d.ID,
		URL:           eventURL(d.ID),
		Time:          s.shortTime(d.ReceivedAt),
		TimeTitle:     s.fullTime(d.ReceivedAt),
		Source:        d.Source,
		Outcome:       string(d.Outcome),
		Mismatch:      d.Mismatch,
		MoneyMismatch: d.MoneyMismatch,
		HTTPStatus:    d.Status,
		EventStatus:   d.EventStatus,
		Booking:       d.Booking,
		Property:      d.Property,
		Amount:        amountText(d),
		Key:           d.Key,
		KeyShort:      shortKey(d.Key),
		Error:         d.Error,
		PayloadHash:   d.PayloadHash,
		Batch:         d.Batch,
		BatchIndex:    d.BatchIndex,
		BatchURL:      batchURL(d.Batch),
	}
}

// batchURL is the page of a batch's first item, where its items are listed ("" for no
// batch).
func batchURL(batch int64) string {
	if batch == 0 {
		return ""
	}
	return eventURL(batch) + "#batch"
}

func itoa(n int) string { return strconv.Itoa(n) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// typed trims the ASCII spaces and tabs around a filter's value, which a user types or
// pastes by accident, and nothing else; every filter of the console that trims what is
// typed trims it here. Unicode's other spaces (U+00A0, U+3000…) are part of a stored key
// or source name, which a filter matches exactly: evt_1 followed by U+00A0 is another
// key than evt_1, and ota followed by it another source (one anyone can make by posting
// to it), shown as such (views.Visible). Labels and currencies are trimmed as they are
// stored (storage.Label, storage.CurrencyCode).
func typed(s string) string { return strings.Trim(s, " \t") }

// Visible is s as the console shows a sender's text (views.Visible), for the command
// line, which lists the same keys, sources and errors on a terminal: there too a key
// holding U+202E must not pass for another, and an escape sequence must not act.
func Visible(s string) string { return views.Visible(s) }

// earliestYear bounds from below the times and days the filters take: no webhook is
// older, so an earlier year is a slip (0026 for 2026). Year 1 is also Go's zero time, which
// every filter reads as no bound: to=0001-01-01 would select every delivery rather than
// none.
const earliestYear = 2000

// checkTimeRange refuses a filter's from and to (fromText and toText as written, "" when
// not given) that no one could mean: a bound before earliestYear, or from after to, which
// would list nothing and say nothing of why. Its *Error names the parameter.
func checkTimeRange(fromText, toText string, from, to time.Time) error {
	// The year as written or at UTC: a ledger's link from its first day, 2000-01-01 at
	// UTC, is written west of Greenwich in 1999.
	early := func(t time.Time) bool { return max(t.Year(), t.UTC().Year()) < earliestYear }
	switch {
	case fromText != "" && early(from):
		return Errorf(http.StatusBadRequest, "from=%q: before %d, older than any webhook", fromText, earliestYear)
	case toText != "" && early(to):
		return Errorf(http.StatusBadRequest, "to=%q: before %d, older than any webhook", toText, earliestYear)
	case fromText != "" && toText != "" && from.After(to):
		return Errorf(http.StatusBadRequest, "from=%q is after to=%q", fromText, toText)
	}
	return nil
}

// timeBound reads a filter's bound name (from, to) in the server's location: a
// datetime-local box's wall-clock time, or an RFC 3339 time with its offset, as the
// ledger's and the dashboard's links give it, exact also in the hour that comes twice
// when summer time ends, where a wall-clock time names the later instant. A box can show
// such a time only as a wall-clock time, so the form sends it back beside the box
// (views.TimeBound): the exact time is meant while the box shows it, and a box changed
// to another time says what is meant. An empty box is no bound.
func (s *Server) timeBound(q url.Values, name string) (time.Time, views.TimeBound, error) {
	box := q.Get(name)
	if box == "" {
		return time.Time{}, views.TimeBound{}, nil
	}
	if t, err := time.Parse(time.RFC3339, box); err == nil {
		return t, views.TimeBound{Input: t.In(s.loc).Format(dateTimeLocal), Exact: box}, nil
	}
	// The exact time counts only while the box shows it, to the second: a box the user
	// changed, or an exact time that is not the box's (a stale form, a crafted link, one
	// with seconds the box cannot show), would filter by a time the page does not show.
	if exact := q.Get(name + "_exact"); exact != "" {
		if t, err := time.Parse(time.RFC3339, exact); err == nil && t.Truncate(time.Minute).Equal(t) &&
			t.In(s.loc).Format(dateTimeLocal) == box {
			return t, views.TimeBound{Input: box, Exact: exact}, nil
		}
	}
	t, err := time.ParseInLocation(dateTimeLocal, box, s.loc)
	return t, views.TimeBound{Input: box}, err
}
