package web

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// ledgerDays is the ledger's period when none is asked for: the last 30 days (UTC),
// today included.
const ledgerDays = 30

// ledgerRowsShown bounds the rows the ledger page lists; the CSV export and the API
// give them all.
const ledgerRowsShown = 500

const dateOnly = "2006-01-02"

// ledgerFilter reads the ledger's filter from a query string: source, property,
// currency, and from and to, days (UTC) like 2026-11-30, both included. A problem is
// returned as an *Error.
func (s *Server) ledgerFilter(q url.Values) (views.LedgerFilter, storage.LedgerFilter, error) {
	vf := views.LedgerFilter{
		Source:   typed(q.Get("source")),
		Property: storage.Label(q.Get("property")),
		Currency: storage.CurrencyCode(q.Get("currency")),
		From:     typed(q.Get("from")),
		To:       typed(q.Get("to")),
	}
	f := storage.LedgerFilter{Source: vf.Source, Property: vf.Property, Currency: vf.Currency}
	today := s.now().UTC().Truncate(24 * time.Hour)
	if vf.From == "" && vf.To == "" {
		vf.From = today.AddDate(0, 0, -(ledgerDays - 1)).Format(dateOnly)
		vf.To = today.Format(dateOnly)
	}
	var toDay time.Time
	if vf.From != "" {
		t, err := time.Parse(dateOnly, vf.From)
		if err != nil {
			return vf, f, Errorf(http.StatusBadRequest, "from=%q: want a day like 2026-11-30", vf.From)
		}
		f.From = t
	}
	if vf.To != "" {
		t, err := time.Parse(dateOnly, vf.To)
		if err != nil {
			return vf, f, Errorf(http.StatusBadRequest, "to=%q: want a day like 2026-11-30", vf.To)
		}
		toDay, f.To = t, t.AddDate(0, 0, 1) // the day named is included
	}
	if err := checkTimeRange(vf.From, vf.To, f.From, toDay); err != nil {
		return vf, f, err
	}
	return vf, f, nil
}

// ledgerLinks builds the events list's links of one ledger row: its deliveries of a
// kind, received in [from, to), of source ("" for any), property and currency. A
// row's property and currency are its deliveries' own, "" for none: the link then
// selects the deliveries without one, not every property's or currency's. The totals
// of a ledger not filtered by property span every property: anyProperty.
type ledgerLinks struct {
	s                          *Server
	from, to                   time.Time
	source, property, currency string
	anyProperty                bool
	api                        bool // links to the API's deliveries instead of the console's events list
}

func (l ledgerLinks) url(set url.Values) string {
	q := url.Values{}
	if l.source != "" {
		q.Set("source", l.source)
	}
	switch {
	case l.property != "":
		q.Set("property", l.property)
	case !l.anyProperty:
		q.Set("property_none", "1")
	}
	if l.currency != "" {
		q.Set("currency", l.currency)
	} else {
		q.Set("currency_none", "1")
	}
	for k, v := range set {
		q[k] = v
	}
	path, loc := "/events?", l.s.loc
	if l.api {
		path, loc = "/api/v1/deliveries?", time.UTC
	}
	if !l.from.IsZero() {
		q.Set("from", linkable(l.from, loc).Format(time.RFC3339))
	}
	if !l.to.IsZero() {
		q.Set("to", linkable(l.to, loc).Format(time.RFC3339))
	}
	return path + q.Encode()
}

// linkable returns t in loc, moved if need be into the years RFC 3339 can write, up to
// 9999, so that the page a link leads to reads it back. A ledger to 9999-12-31 ends at
// the start of year 10000; the moments moved past hold no delivery. A ledger starts no
// earlier than earliestYear.
func linkable(t time.Time, loc *time.Location) time.Time {
	if last := time.Date(9999, 12, 31, 23, 59, 59, 0, loc); t.After(last) {
		return last
	}
	return t.In(loc)
}

// ledgerFilters are the events list's filters of each kind of ledger cell, by the
// API's name of it, each selecting exactly the deliveries the cell counts (storage's
// LedgerRow says which): caught counts only the duplicates that carried an amount, a
// plain decimal or not; a money mismatch or a suspect counts whether or not its
// delivery carried one. The money at risk, the deliveries of several kinds at once, has
// none: no one events filter selects a money mismatch or an open suspect.
var ledgerFilters = map[string]url.Values{
	"caught":              {"outcome": {"duplicate"}, "amount": {amountAny}},
	"money_mismatch":      {"mismatch": {"money"}},
	"business_key_open":   {"flag": {string(storage.SuspectBusinessKey)}, "flag_state": {storage.SuspectOpen}},
	"correlation_open":    {"flag": {string(storage.SuspectCorrelation)}, "flag_state": {storage.SuspectOpen}},
	"late_duplicate_open": {"flag": {string(storage.SuspectLateDuplicate)}, "flag_state": {storage.SuspectOpen}},
	"confirmed":           {"flag": {string(storage.FlagAny)}, "flag_state": {storage.SuspectConfirmed}},
}

// line writes r as the page shows it, with links to its deliveries.
func (l ledgerLinks) line(r storage.LedgerRow) views.LedgerLine {
	cell := func(m storage.Money, kind string) views.LedgerCell {
		c := views.LedgerCell{Sum: viewSum(m, r.Currency)}
		if m.Count > 0 && ledgerFilters[kind] != nil {
			c.URL = l.url(ledgerFilters[kind])
		}
		return c
	}
	v := views.LedgerLine{
		Source: r.Source, Property: r.Property, Currency: currencyLabel(r.Currency),
		Caught:        cell(r.Caught, "caught"),
		MoneyMismatch: cell(r.MoneyMismatch, "money_mismatch"),
		BusinessKey:   cell(r.BusinessKey, "business_key_open"),
		Correlation:   cell(r.Correlation, "correlation_open"),
		LateDuplicate: cell(r.LateDuplicate, "late_duplicate_open"),
		AtRisk:        cell(r.AtRisk(), "at_risk"),
		Confirmed:     cell(r.Confirmed, "confirmed"),
	}
	if !r.Day.IsZero() {
		v.Day = r.Day.Format(dateOnly)
	}
	return v
}

func (s *Server) handleLedger(w http.ResponseWriter, r *http.Request) error {
	vf, f, err := s.ledgerFilter(r.URL.Query())
	v := views.Ledger{Page: s.page(r, "Ledger", "ledger"), Filter: vf, Sources: s.sourceNames()}
	q := url.Values{}
	for k, val := range map[string]string{"source": vf.Source, "property": vf.Property, "currency": vf.Currency, "from": vf.From, "to": vf.To} {
		if val != "" {
			q.Set(k, val)
		}
	}
	v.CSVURL = "/ledger.csv?" + q.Encode()
	if err != nil {
		v.Error = err.Error()
		return s.render(w, r, http.StatusBadRequest, views.LedgerView(v))
	}
	f.Limit = ledgerRowsShown
	l, err := s.suspects.Ledger(r.Context(), f)
	if err != nil {
		return err
	}
	problem, err := s.unknownForensicSource(r.Context(), f.Source, len(l.Rows)+len(l.Totals) > 0)
	if err != nil {
		return err
	}
	if problem != "" {
		v.Error = problem
		return s.render(w, r, http.StatusBadRequest, views.LedgerView(v))
	}
	v.More = l.More
	for _, t := range l.Totals {
		v.Totals = append(v.Totals, ledgerLinks{s: s, from: f.From, to: f.To, source: f.Source, property: f.Property,
			anyProperty: f.Property == "", currency: t.Currency}.line(t))
	}
	for _, row := range l.Rows {
		v.Rows = append(v.Rows, ledgerLinks{s: s, from: row.Day, to: row.Day.AddDate(0, 0, 1), source: row.Source,
			property: row.Property, currency: row.Currency}.line(row))
	}
	return s.render(w, r, http.StatusOK, views.LedgerView(v))
}

// ledgerCSVHeader names the ledger export's columns: amounts in major units of the
// row's currency, without separators; unsummed counts the amounts left out of the sums
// (no exact number of minor units), and no_amount the deliveries that carried none,
// counted but adding nothing to them. New columns go last: scripts read them by place.
var ledgerCSVHeader = []string{"day", "source", "property", "currency",
	"caught", "caught_amount", "money_mismatches", "money_mismatch_amount",
	"suspected_duplicates_open", "suspected_duplicates_amount", "suspected_double_refunds_open", "suspected_double_refunds_amount",
	"late_duplicates_open", "late_duplicates_amount", "at_risk", "at_risk_amount",
	"confirmed_doubles", "confirmed_amount", "unsummed", "no_amount"}

func (s *Server) handleLedgerCSV(w http.ResponseWriter, r *http.Request) error {
	_, f, err := s.ledgerFilter(r.URL.Query())
	if err != nil {
		return err
	}
	l, err := s.suspects.Ledger(r.Context(), f)
	if err != nil {
		return err
	}
	if problem, err := s.unknownForensicSource(r.Context(), f.Source, len(l.Rows)+len(l.Totals) > 0); err != nil {
		return err
	} else if problem != "" {
		return badRequest(problem)
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="hookdedup-ledger-%s.csv"`, s.now().In(s.loc).Format("20060102-150405")))
	cw := csv.NewWriter(w)
	cw.Write(ledgerCSVHeader)
	for _, row := range l.Rows {
		rec := []string{row.Day.Format(dateOnly), csvCell(row.Source), csvCell(row.Property), csvCell(row.Currency)}
		risk, flagged := row.AtRisk(), row.Deliveries()
		// A money mismatch is caught and at risk alike, and a delivery may be at risk
		// and confirmed: each amount is left out once.
		unsummed := row.Caught.Unsummed + flagged.Unsummed - row.MoneyMismatch.Unsummed
		// Caught counts only duplicates that carried an amount: those without one are
		// at risk or confirmed.
		noAmount := row.Caught.NoAmount + flagged.NoAmount
		for _, m := range []storage.Money{row.Caught, row.MoneyMismatch, row.BusinessKey, row.Correlation, row.LateDuplicate, risk, row.Confirmed} {
			rec = append(rec, strconv.FormatInt(m.Count, 10), storage.FormatMinor(m.Minor, row.Currency))
		}
		cw.Write(append(rec, strconv.FormatInt(unsummed, 10), strconv.FormatInt(noAmount, 10)))
	}
	cw.Flush()
	return cw.Error()
}

// apiMoney is a count and its amounts summed, in the API: Amount in major units of
// the row's currency ("412.50"), Minor the same in minor units (41250).
type apiMoney struct {
	Count    int64  `json:"count"`
	Amount   string `json:"amount"`
	Minor    int64  `json:"minor"`
	Unsummed int64  `json:"unsummed,omitempty"`
	// NoAmount counts those that carried no amount: amount is no sum of theirs.
	NoAmount int64 `json:"no_amount,omitempty"`
}

// apiLedgerRow is one ledger row in the API; a currency's totals have no day, source
// and property.
type apiLedgerRow struct {
	Day           string   `json:"day,omitempty"`
	Source        string   `json:"source,omitempty"`
	Property      string   `json:"property,omitempty"`
	Currency      string   `json:"currency"`
	Caught        apiMoney `json:"caught"`
	MoneyMismatch apiMoney `json:"money_mismatch"`
	BusinessKey   apiMoney `json:"business_key_open"`
	Correlation   apiMoney `json:"correlation_open"`
	LateDuplicate apiMoney `json:"late_duplicate_open"`
	AtRisk        apiMoney `json:"at_risk"`
	Confirmed     apiMoney `json:"confirmed"`
	// Deliveries are the API's lists of the row's deliveries of each kind that has any,
	// by the names above.
	Deliveries map[string]string `json:"deliveries,omitempty"`
}

func toAPILedgerRow(r storage.LedgerRow) apiLedgerRow {
	m := func(x storage.Money) apiMoney {
		return apiMoney{Count: x.Count, Amount: storage.FormatMinor(x.Minor, r.Currency), Minor: x.Minor, Unsummed: x.Unsummed,
			NoAmount: x.NoAmount}
	}
	out := apiLedgerRow{Source: r.Source, Property: r.Property, Currency: r.Currency,
		Caught: m(r.Caught), MoneyMismatch: m(r.MoneyMismatch), BusinessKey: m(r.BusinessKey), Correlation: m(r.Correlation),
		LateDuplicate: m(r.LateDuplicate), AtRisk: m(r.AtRisk()), Confirmed: m(r.Confirmed)}
	if !r.Day.IsZero() {
		out.Day = r.Day.Format(dateOnly)
	}
	return out
}

func (a *api) ledger(w http.ResponseWriter, r *http.Request) error {
	_, f, err := a.ledgerFilter(r.URL.Query())
	if err != nil {
		return err
	}
	limit, err := apiLimit(r.URL.Query(), ledgerRowsShown, 100_000)
	if err != nil {
		return err
	}
	f.Limit = limit
	l, err := a.suspects.Ledger(r.Context(), f)
	if err != nil {
		return err
	}
	if problem, err := a.unknownForensicSource(r.Context(), f.Source, len(l.Rows)+len(l.Totals) > 0); err != nil {
		return err
	} else if problem != "" {
		return Errorf(http.StatusBadRequest, "%s", problem)
	}
	out := struct {
		From   string         `json:"from,omitempty"`
		To     string         `json:"to,omitempty"` // the last day included
		Totals []apiLedgerRow `json:"totals"`
		Rows   []apiLedgerRow `json:"rows"`
		// More: rows past the limit were left out (narrow the filter, or raise limit).
		More bool `json:"more,omitempty"`
	}{Totals: []apiLedgerRow{}, Rows: []apiLedgerRow{}, More: l.More}
	if !f.From.IsZero() {
		out.From = f.From.Format(dateOnly)
	}
	if !f.To.IsZero() {
		out.To = f.To.AddDate(0, 0, -1).Format(dateOnly)
	}
	for _, t := range l.Totals {
		out.Totals = append(out.Totals, toAPILedgerRow(t))
	}
	for _, row := range l.Rows {
		ar := toAPILedgerRow(row)
		links := ledgerLinks{s: a.Server, from: row.Day, to: row.Day.AddDate(0, 0, 1), source: row.Source,
			property: row.Property, currency: row.Currency, api: true}
		for name, m := range map[string]storage.Money{"caught": row.Caught, "money_mismatch": row.MoneyMismatch,
			"business_key_open": row.BusinessKey, "correlation_open": row.Correlation,
			"late_duplicate_open": row.LateDuplicate, "confirmed": row.Confirmed} {
			if m.Count > 0 {
				if ar.Deliveries == nil {
					ar.Deliveries = map[string]string{}
				}
				ar.Deliveries[name] = links.url(ledgerFilters[name])
			}
		}
		out.Rows = append(out.Rows, ar)
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}
