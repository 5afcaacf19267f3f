package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// suspectStore is what the flags on deliveries, the suspects page, their review and
// the ledger ask of storage.
type suspectStore interface {
	Suspects(ctx context.Context, f storage.SuspectFilter) (storage.SuspectPage, error)
	// SuspectsOf returns the suspects naming each of the deliveries, flagged or other.
	SuspectsOf(ctx context.Context, ids []int64) (map[int64][]storage.Suspect, error)
	// DeliveriesKept reports which of the deliveries ids retention has not swept.
	DeliveriesKept(ctx context.Context, ids []int64) (map[int64]bool, error)
	SuspectCounts(ctx context.Context) ([]storage.SuspectCount, error)
	// ReviewSuspect returns ErrNotFound for an unknown id and ErrInvalidReview for a
	// state other than confirmed or dismissed, or no reason.
	ReviewSuspect(ctx context.Context, id int64, actor, state, reason string) (storage.Suspect, error)
	// ReviewSuspectFrom is ReviewSuspect of a suspect seen in state from; one that
	// another review changed meanwhile is returned as it is, with ErrReviewedMeanwhile.
	ReviewSuspectFrom(ctx context.Context, id int64, actor, from, state, reason string) (storage.Suspect, error)
	Ledger(ctx context.Context, f storage.LedgerFilter) (storage.Ledger, error)
	// WouldFlag returns the suspects a delivery p describes would be flagged as, were it
	// accepted now. It writes nothing.
	WouldFlag(ctx context.Context, p storage.Probe) ([]storage.Suspect, error)
}

// suspectKinds are the kinds of suspect in the order the console lists them, with
// their names in words.
var suspectKinds = []kindName{
	{storage.SuspectBusinessKey, "suspected duplicate"},
	{storage.SuspectCorrelation, "suspected double refund"},
	{storage.SuspectLateDuplicate, "late duplicate"},
}

// kindLabel names a kind of suspect in words.
func kindLabel(kind storage.SuspectKind) string {
	for _, k := range suspectKinds {
		if k.kind == kind {
			return k.label
		}
	}
	return string(kind)
}

// kindName is a kind of suspect and its name in words.
type kindName struct {
	kind  storage.SuspectKind
	label string
}

// validKind reports whether kind is a kind of suspect.
func validKind(kind string) bool {
	return slices.ContainsFunc(suspectKinds, func(k kindName) bool { return string(k.kind) == kind })
}

// validSuspectState reports whether state is a review state.
func validSuspectState(state string) bool {
	return state == storage.SuspectOpen || state == storage.SuspectConfirmed || state == storage.SuspectDismissed
}

// suspectAmount is a suspect's amount in its currency, as lists show it.
func suspectAmount(x storage.Suspect) string {
	return amountText(storage.Delivery{Amount: x.Amount, Currency: x.Currency})
}

// flagBadges are the badges of the suspects that name delivery id.
func flagBadges(id int64, suspects []storage.Suspect) []views.FlagBadge {
	var out []views.FlagBadge
	for _, x := range suspects {
		b := views.FlagBadge{Kind: string(x.Kind), Label: kindLabel(x.Kind), State: x.State, URL: eventURL(id) + "#flags"}
		switch {
		case x.Delivery == id && x.Other != 0:
			b.Title = fmt.Sprintf("%s of delivery %d (%s)", kindLabel(x.Kind), x.Other, x.State)
		case x.Delivery == id:
			b.Title = fmt.Sprintf("%s (%s)", kindLabel(x.Kind), x.State)
		default:
			b.Label = "doubled?"
			b.Title = fmt.Sprintf("delivery %d may double this one: %s (%s)", x.Delivery, kindLabel(x.Kind), x.State)
		}
		out = append(out, b)
	}
	return out
}

// unlinkSwept takes the link off each of flags whose other delivery retention has
// swept since it was flagged (the suspect outlives it), so that the page says so rather
// than link to a page that is gone.
func (s *Server) unlinkSwept(ctx context.Context, flags []views.FlagItem) error {
	var ids []int64
	for _, f := range flags {
		if f.OtherID != 0 {
			ids = append(ids, f.OtherID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	kept, err := s.suspects.DeliveriesKept(ctx, ids)
	if err != nil {
		return err
	}
	for i := range flags {
		if f := &flags[i]; f.OtherID != 0 && !kept[f.OtherID] {
			f.OtherURL, f.OtherSwept = "", true
		}
	}
	return nil
}

// flagItems are the suspects that name d, as its page shows them.
func (s *Server) flagItems(d storage.Delivery, suspects []storage.Suspect) []views.FlagItem {
	var out []views.FlagItem
	for _, x := range suspects {
		it := views.FlagItem{
			ID: x.ID, Kind: string(x.Kind), Label: kindLabel(x.Kind), State: x.State, Flagged: x.Delivery == d.ID,
			Rule: x.Rule, Amount: suspectAmount(x), FlaggedAt: s.fullTime(x.FlaggedAt),
			ReviewedBy: x.ReviewedBy, ReviewedAt: s.fullTime(x.ReviewedAt), Reason: x.Reason,
			Return: eventURL(d.ID) + "#flags", ReviewAction: "/suspects/" + strconv.FormatInt(x.ID, 10) + "/review",
		}
		if it.Flagged {
			it.OtherID, it.OtherSource = x.Other, x.OtherSource
			switch x.Kind {
			case storage.SuspectBusinessKey:
				it.Explain = "Its business key equals that of an earlier accepted delivery of the same source, under another event id:"
			case storage.SuspectCorrelation:
				it.Explain = "The same booking, amount and currency came through another source:"
			case storage.SuspectLateDuplicate:
				it.Explain = "Its key was claimed before, and that claim has expired: accepted again, late."
				it.FirstSeen = s.fullTime(x.FirstSeen)
				if x.Other != 0 {
					it.Explain += " The first delivery:"
				}
			default:
				it.Explain = "It may double"
			}
		} else {
			it.OtherID, it.OtherSource = x.Delivery, x.Source
			it.Explain = "A later delivery may double this one (" + kindLabel(x.Kind) + "):"
		}
		if it.OtherSource == d.Source {
			it.OtherSource = ""
		}
		if it.OtherID != 0 {
			it.OtherURL = eventURL(it.OtherID)
		}
		out = append(out, it)
	}
	return out
}

// flagsOf returns the badges of each delivery's suspects, by delivery id.
func (s *Server) flagsOf(ctx context.Context, ds []storage.Delivery) (map[int64][]views.FlagBadge, error) {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	of, err := s.suspects.SuspectsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][]views.FlagBadge, len(of))
	for id, xs := range of {
		out[id] = flagBadges(id, xs)
	}
	return out, nil
}

// suspectsURL lists suspects in state (all when ""), of kind (any when "").
func suspectsURL(state, kind string) string {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	} else {
		q.Set("state", "all")
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	return "/suspects?" + q.Encode()
}

// suspectStats sums counts by kind, every kind listed.
func suspectStats(counts []storage.SuspectCount) []views.SuspectKindStats {
	out := make([]views.SuspectKindStats, 0, len(suspectKinds))
	for _, k := range suspectKinds {
		st := views.SuspectKindStats{Kind: string(k.kind), Label: k.label,
			OpenURL:      suspectsURL(storage.SuspectOpen, string(k.kind)),
			ConfirmedURL: suspectsURL(storage.SuspectConfirmed, string(k.kind)),
			AllURL:       suspectsURL("", string(k.kind))}
		open, confirmed := map[string]storage.Money{}, map[string]storage.Money{}
		for _, c := range counts {
			if c.Kind != k.kind {
				continue
			}
			switch c.State {
			case storage.SuspectOpen:
				st.Open += c.Suspects
				m := open[c.Currency]
				m.Add(c.Money)
				open[c.Currency] = m
			case storage.SuspectConfirmed:
				st.Confirmed += c.Suspects
				m := confirmed[c.Currency]
				m.Add(c.Money)
				confirmed[c.Currency] = m
			case storage.SuspectDismissed:
				st.Dismissed += c.Suspects
			}
		}
		st.OpenMoney, st.ConfirmedMoney = minorSums(open), minorSums(confirmed)
		out = append(out, st)
	}
	return out
}

// minorSums writes sums in minor units by currency, each in its currency's decimals
// with thousands separators, in the order of their codes, no currency last, with the
// amounts each left out of its sum and those that carried none.
func minorSums(byCurrency map[string]storage.Money) []views.MoneySum {
	codes := currencyOrder(byCurrency)
	out := make([]views.MoneySum, 0, len(codes))
	for _, code := range codes {
		out = append(out, views.MoneySum{Currency: currencyLabel(code), Sum: viewSum(byCurrency[code], code)})
	}
	return out
}

// viewSum is m as the console shows it, its amounts written in currency.
func viewSum(m storage.Money, currency string) views.Sum {
	return views.Sum{Count: m.Count, Amount: minorText(m.Minor, currency), Unsummed: m.Unsummed, NoAmount: m.NoAmount}
}

// minorText writes minor units of currency in major units with thousands separators:
// "1,234.50".
func minorText(minor int64, currency string) string {
	s := storage.FormatMinor(minor, currency)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if dot {
		b.WriteString("." + frac)
	}
	return b.String()
}

func (s *Server) handleSuspects(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = storage.SuspectOpen
	}
	kind, source := q.Get("kind"), q.Get("source")
	f := storage.SuspectFilter{Kind: storage.SuspectKind(kind), Source: source, Limit: 100}
	switch {
	case state == "all":
	case validSuspectState(state):
		f.State = state
	default:
		return badRequest("Unknown state: choose open, confirmed, dismissed or all.")
	}
	if kind != "" && !validKind(kind) {
		return badRequest("Unknown kind: choose business_key, correlation or late_duplicate.")
	}
	var err error
	if f.Before, err = pageBefore(q); err != nil {
		return err
	}
	page, err := s.suspects.Suspects(ctx, f)
	if err != nil {
		return err
	}
	if problem, err := s.unknownForensicSource(ctx, source, len(page.Suspects) > 0 || f.Before != 0); err != nil {
		return err
	} else if problem != "" {
		return badRequest(problem)
	}
	counts, err := s.suspects.SuspectCounts(ctx)
	if err != nil {
		return err
	}
	v := views.Suspects{
		Page: s.page(r, "Suspects", "suspects"), State: state, Kind: kind, Source: source,
		Sources: s.sourceNames(), Stats: suspectStats(counts),
	}
	for _, k := range suspectKinds {
		v.Kinds = append(v.Kinds, views.Option{Value: string(k.kind), Label: k.label})
	}
	// Each tab's pages keep the kind and source.
	pages := func(st string) pager {
		lq := url.Values{"state": {st}}
		if kind != "" {
			lq.Set("kind", kind)
		}
		if source != "" {
			lq.Set("source", source)
		}
		return newPager("/suspects", lq)
	}
	for _, t := range []struct{ state, label string }{
		{storage.SuspectOpen, "Open"}, {storage.SuspectConfirmed, "Confirmed doubles"},
		{storage.SuspectDismissed, "Not doubles"}, {"all", "All"},
	} {
		v.Tabs = append(v.Tabs, views.Link{Label: t.label, URL: pages(t.state).newest(), Active: t.state == state})
	}
	// Suspects outlive the deliveries retention sweeps: a row links to no page that is
	// gone, and an open suspect whose delivery is gone, having no page to be reviewed on,
	// is reviewed in its row.
	var ids []int64
	for _, x := range page.Suspects {
		ids = append(ids, x.Delivery)
		if x.Other != 0 {
			ids = append(ids, x.Other)
		}
	}
	kept, err := s.suspects.DeliveriesKept(ctx, ids)
	if err != nil {
		return err
	}
	u, _ := UserFrom(ctx)
	for _, x := range page.Suspects {
		row := views.SuspectRow{
			ID: x.ID, Kind: string(x.Kind), Label: kindLabel(x.Kind), State: x.State,
			Flagged: s.shortTime(x.FlaggedAt), FlaggedTitle: s.fullTime(x.FlaggedAt),
			DeliveryID: x.Delivery, DeliveryURL: eventURL(x.Delivery), OtherID: x.Other,
			Source: x.Source, OtherSource: x.OtherSource, Rule: x.Rule, Property: x.Property, Booking: x.Booking,
			Amount: suspectAmount(x), ReviewedBy: x.ReviewedBy, Reason: x.Reason,
		}
		switch {
		case x.Other != 0 && kept[x.Other]:
			row.OtherURL = eventURL(x.Other)
		case x.Other != 0:
			row.OtherSwept = true
		}
		if !kept[x.Delivery] {
			row.DeliveryURL = ""
			if x.State == storage.SuspectOpen && Allowed(u.Role, storage.RoleOperator) {
				row.ReviewAction, row.Return = "/suspects/"+strconv.FormatInt(x.ID, 10)+"/review", r.URL.RequestURI()
			}
		}
		v.Rows = append(v.Rows, row)
	}
	if page.Next != 0 {
		v.NextURL = pages(state).before(page.Next)
	}
	if f.Before != 0 {
		v.FirstURL = pages(state).newest()
	}
	v.Empty = "No suspects"
	if state != "all" {
		v.Empty = "No " + map[string]string{storage.SuspectOpen: "open suspects", storage.SuspectConfirmed: "confirmed doubles",
			storage.SuspectDismissed: "dismissed suspects"}[state]
	}
	return s.render(w, r, http.StatusOK, views.SuspectsView(v))
}

// handleReview records an operator's verdict on a suspect (state confirmed or
// dismissed) with a required reason, which goes to the audit log, then goes back where
// the form was.
func (s *Server) handleReview(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u, _ := UserFrom(ctx)
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return errNotFound
	}
	back := localPath(r.PostFormValue("return"), "/suspects")
	state := r.PostFormValue("state")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	switch {
	case state != storage.SuspectConfirmed && state != storage.SuspectDismissed:
		return badRequest("Choose confirmed double or not a double.")
	case reasonProblem(reason, true) != "":
		flash(r, w, "error", reasonProblem(reason, true))
	default:
		// The console offers a review of an open suspect only: one that another operator
		// reviewed since the page was drawn keeps their verdict, and this one is told.
		x, err := s.suspects.ReviewSuspectFrom(ctx, id, u.Name, storage.SuspectOpen, state, reason)
		if errors.Is(err, storage.ErrInvalidReview) {
			return badRequest("Choose confirmed double or not a double, and give a reason.")
		}
		if errors.Is(err, storage.ErrReviewedMeanwhile) {
			flash(r, w, "error", fmt.Sprintf("Suspect %d was reviewed meanwhile by %s as %s: nothing changed.",
				x.ID, x.ReviewedBy, reviewVerdict(x.State)))
			http.Redirect(w, r, back, http.StatusSeeOther)
			return nil
		}
		if err != nil {
			return err
		}
		s.log.Info("suspect reviewed", logBy, u.Name, logSource, x.Source, logAction, state, "suspect", x.ID)
		flash(r, w, "ok", fmt.Sprintf("Suspect %d on delivery %d marked %s.", x.ID, x.Delivery, reviewVerdict(state)))
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// reviewVerdict is a review's state in the console's words.
func reviewVerdict(state string) string {
	if state == storage.SuspectDismissed {
		return "not a double"
	}
	return "a confirmed double"
}

// apiSuspect is a suspect as the API shows it.
type apiSuspect struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`            // business_key, correlation or late_duplicate
	Delivery    string    `json:"delivery"`        // the delivery flagged
	Other       string    `json:"other,omitempty"` // the delivery it may double; absent when unknown
	Source      string    `json:"source"`
	OtherSource string    `json:"other_source,omitempty"`
	Rule        string    `json:"rule,omitempty"`
	Property    string    `json:"property,omitempty"`
	Booking     string    `json:"booking,omitempty"`
	Amount      string    `json:"amount,omitempty"`
	Currency    string    `json:"currency,omitempty"`
	FirstSeen   time.Time `json:"first_seen,omitzero"`
	FlaggedAt   time.Time `json:"flagged_at"`
	State       string    `json:"state"` // open, confirmed or dismissed
	ReviewedBy  string    `json:"reviewed_by,omitempty"`
	ReviewedAt  time.Time `json:"reviewed_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
}

func toAPISuspect(x storage.Suspect) apiSuspect {
	out := apiSuspect{ID: strconv.FormatInt(x.ID, 10), Kind: string(x.Kind), Delivery: strconv.FormatInt(x.Delivery, 10),
		Source: x.Source, OtherSource: x.OtherSource, Rule: x.Rule, Property: x.Property, Booking: x.Booking,
		Amount: x.Amount, Currency: x.Currency, FirstSeen: x.FirstSeen, FlaggedAt: x.FlaggedAt, State: x.State,
		ReviewedBy: x.ReviewedBy, ReviewedAt: x.ReviewedAt, Reason: x.Reason}
	if x.Other != 0 {
		out.Other = strconv.FormatInt(x.Other, 10)
	}
	return out
}

func toAPISuspects(xs []storage.Suspect) []apiSuspect {
	out := make([]apiSuspect, len(xs)) // [] rather than null when there are none
	for i, x := range xs {
		out[i] = toAPISuspect(x)
	}
	return out
}

func (a *api) listSuspects(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := storage.SuspectFilter{Kind: storage.SuspectKind(q.Get("kind")), State: q.Get("state"), Source: q.Get("source")}
	if f.Kind != "" && !validKind(string(f.Kind)) {
		return Errorf(http.StatusBadRequest, "kind %q: want business_key, correlation or late_duplicate", f.Kind)
	}
	if f.State != "" && !validSuspectState(f.State) {
		return Errorf(http.StatusBadRequest, "state %q: want open, confirmed or dismissed", f.State)
	}
	var err error
	if f.Delivery, err = apiID(q, "delivery"); err != nil {
		return err
	}
	if f.From, err = apiTime(q, "from"); err != nil {
		return err
	}
	if f.To, err = apiTime(q, "to"); err != nil {
		return err
	}
	if err := checkTimeRange(q.Get("from"), q.Get("to"), f.From, f.To); err != nil {
		return err
	}
	if f.Before, err = apiID(q, "before"); err != nil {
		return err
	}
	limit, err := apiLimit(q, 100, 1000)
	if err != nil {
		return err
	}
	f.Limit = limit
	page, err := a.suspects.Suspects(r.Context(), f)
	if err != nil {
		return err
	}
	if problem, err := a.unknownForensicSource(r.Context(), f.Source, len(page.Suspects) > 0 || f.Before != 0); err != nil {
		return err
	} else if problem != "" {
		return Errorf(http.StatusBadRequest, "%s", problem)
	}
	out := struct {
		Suspects []apiSuspect `json:"suspects"`
		Next     string       `json:"next,omitempty"` // pass as before= for the next page
	}{Suspects: []apiSuspect{}}
	for _, x := range page.Suspects {
		out.Suspects = append(out.Suspects, toAPISuspect(x))
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(page.Next, 10)
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

// reviewRequest is the body of POST /api/v1/suspects/{id}/review.
type reviewRequest struct {
	State  string `json:"state"` // confirmed or dismissed
	Reason string `json:"reason"`
	// From, optional, is the state the reviewer saw (open, confirmed or dismissed): a
	// suspect another review moved out of it since is left as it is (409).
	From string `json:"from"`
}

func (a *api) reviewSuspect(w http.ResponseWriter, r *http.Request) error {
	id, err := apiPathID(r, "suspect")
	if err != nil {
		return err
	}
	var req reviewRequest
	if err := decodeBody(w, r, &req, `{"state":"confirmed" or "dismissed","reason":…}`); err != nil {
		return err
	}
	if req.State != storage.SuspectConfirmed && req.State != storage.SuspectDismissed {
		return Errorf(http.StatusBadRequest, "state %q: want confirmed (a double) or dismissed (not a double)", req.State)
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	if req.From != "" && !validSuspectState(req.From) {
		return Errorf(http.StatusBadRequest, "from %q: want open, confirmed or dismissed", req.From)
	}
	u, _ := UserFrom(r.Context())
	x, err := a.suspects.ReviewSuspectFrom(r.Context(), id, u.Name, req.From, req.State, req.Reason)
	if errors.Is(err, storage.ErrNotFound) {
		return noSuchID("suspect", id)
	}
	if errors.Is(err, storage.ErrReviewedMeanwhile) {
		return Errorf(http.StatusConflict, "suspect %d is %s (by %s), not %s: reviewed meanwhile; nothing changed", id, x.State, x.ReviewedBy, req.From)
	}
	if err != nil {
		return err
	}
	a.log.Info("suspect reviewed", logBy, u.Name, logSource, x.Source, logAction, req.State, "suspect", x.ID)
	writeAPI(w, http.StatusOK, toAPISuspect(x))
	return nil
}
