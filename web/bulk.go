package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// bulkStore is what bulk actions (their pages and the API's) ask of storage.
type bulkStore interface {
	// CreateBulkPreview returns ErrTooManyKeys past storage.MaxBulkKeys.
	CreateBulkPreview(ctx context.Context, req storage.BulkRequest) (storage.BulkAction, error)
	// BulkAction returns ErrNotFound if there is no such action.
	BulkAction(ctx context.Context, id int64) (storage.BulkAction, error)
	BulkActions(ctx context.Context, state string, before int64, limit int) ([]storage.BulkAction, error)
	CountBulkActions(ctx context.Context, state string) (int, error)
	BulkSample(ctx context.Context, id int64) ([]storage.BulkKey, error)
	BulkKeys(ctx context.Context, id int64, limit int) ([]storage.BulkKey, error)
	BulkSources(ctx context.Context, id int64) ([]string, error)
	// StartBulkAction returns ErrNotRequester for anyone but the requester,
	// ErrBulkState unless the action is a preview, and an *ActorGoneError when actor is
	// no longer an operator.
	StartBulkAction(ctx context.Context, id int64, actor string, t storage.ApprovalThresholds) (storage.BulkAction, error)
	// ApproveBulkAction and RefuseBulkAction return ErrSelfApproval for the requester
	// and ErrBulkState unless the action waits for approval, and an *ActorGoneError
	// when actor is no longer an operator; ApproveBulkAction returns a
	// *RequesterGoneError when the requester is no longer an operator.
	ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error)
	RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error)
	// CancelBulkAction returns ErrBulkState for an action that is over, and an
	// *ActorGoneError when actor is no longer an operator.
	CancelBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error)
	ReprocessedBy(ctx context.Context, actor string) ([]storage.MoneyTotal, error)
}

// overThresholds says why a, a reprocess, needs a second operator's approval, or would
// if it were started now: its money above the thresholds, together with what its
// requester reprocessed without approval within storage.ReprocessWindow.
func (s *Server) overThresholds(ctx context.Context, a storage.BulkAction) ([]string, error) {
	if a.Kind != storage.BulkReprocess || len(s.thresholds) == 0 {
		return s.thresholds.Over(a.Money, a.Unreadable), nil
	}
	earlier, err := s.bulk.ReprocessedBy(ctx, a.RequestedBy)
	if err != nil {
		return nil, err
	}
	over := s.thresholds.OverWith(a.Money, earlier, a.Unreadable)
	if len(over) == 0 && a.State == storage.BulkPendingApproval {
		// What its requester had reprocessed when it was started has aged out since.
		over = []string{"its money together with what " + a.RequestedBy + " had reprocessed in the last " + storage.ReprocessWindowWords + " when it was started"}
	}
	return over, nil
}

// bulkListed is how many actions a page of the bulk page lists, and bulkPendingListed
// how many a page of Pending approvals does.
const (
	bulkListed        = 30
	bulkPendingListed = 200
)

// bulkPage reads a page of the console's actions in state ("" for all), limit at most,
// below the before of the query q of path, and the addresses of the next page (older
// actions; "" on the last) and of the first (on a later page). The next page keeps the
// rest of q: the bulk page's query is also its form's.
func (s *Server) bulkPage(ctx context.Context, state string, limit int, path string, q url.Values) (acts []storage.BulkAction, next, newest string, err error) {
	before, err := pageBefore(q)
	if err != nil {
		return nil, "", "", err
	}
	// One more than listed tells whether there is a next page.
	acts, err = s.bulk.BulkActions(ctx, state, before, limit+1)
	if err != nil {
		return nil, "", "", err
	}
	pages := newPager(path, q)
	if len(acts) > limit {
		acts = acts[:limit]
		next = pages.before(acts[len(acts)-1].ID)
	}
	if before != 0 {
		newest = pages.newest()
	}
	return acts, next, newest, nil
}

// bulkError turns the refusals of bulk actions into errors the user may read.
func bulkError(err error) error {
	switch {
	case errors.Is(err, storage.ErrSelfApproval):
		return Errorf(http.StatusForbidden, "You requested this action: a second operator must approve or refuse it.")
	case errors.Is(err, storage.ErrNotRequester):
		return Errorf(http.StatusForbidden, "Only the operator who made this preview can start it; make your own preview to act.")
	case errors.Is(err, storage.ErrBulkState):
		return Errorf(http.StatusConflict, "This action's state does not allow that any more; reload to see where it stands.")
	case errors.Is(err, storage.ErrPreviewStale):
		return Errorf(http.StatusConflict, "This preview was made more than a day ago: its keys may have moved on since. Make a new preview of the same filter.")
	case errors.Is(err, storage.ErrTooManyKeys):
		return Errorf(http.StatusUnprocessableEntity, "The filter matches more than %d keys: narrow it (a source, a time range) or act in parts.", storage.MaxBulkKeys)
	}
	if gone, ok := errors.AsType[*storage.RequesterGoneError](err); ok {
		// Made a viewer or removed since the request: approved, the action would run
		// under the name of someone who may no longer reprocess. Refusing closes it.
		return Errorf(http.StatusConflict, "This action cannot be approved: %s. Refuse it, and ask again under a current operator's name.", gone)
	}
	if gone, ok := errors.AsType[*storage.ActorGoneError](err); ok {
		// 403, as the same request a moment later would get: the role it was let in
		// with no longer holds.
		if gone.Role == "" {
			return Errorf(http.StatusForbidden, "You can no longer %s actions: your user %s was removed. Nothing was changed.", gone.Verb, gone.Name)
		}
		return Errorf(http.StatusForbidden, "You can no longer %s actions: you are a %s now, and only operators and admins can. Nothing was changed.", gone.Verb, gone.Role)
	}
	return err
}

// needsApprovalWords says why a reprocess of keys was refused and how to ask for it.
func needsApprovalWords(e *storage.NeedsApprovalError) string {
	return "Not reprocessed: " + strings.Join(e.Over, ", ") + " (the approval threshold). " +
		"Make it a bulk action under Bulk actions: a second operator approves it there."
}

// blankLabel names the first of a bulk filter's labels given as blanks alone, or says
// "": read as a label (storage.Label), such a one would be empty, a filter left out,
// and the action would cover every key. It is refused, as a blank key is.
func blankLabel(property, booking, status string) string {
	for _, l := range [...]struct{ name, raw string }{{"property", property}, {"booking", booking}, {"status", status}} {
		if l.raw != "" && storage.Label(l.raw) == "" {
			return l.name
		}
	}
	return ""
}

// bulkFilterForm reads a bulk filter from the console's form or query (the names of
// the keys and events pages' filters), times in the console's zone. A problem is said
// in words for the user.
func (s *Server) bulkFilterForm(q url.Values) (views.BulkForm, storage.BulkFilter, error) {
	v := views.BulkForm{
		Kind: q.Get("kind"), Reason: strings.TrimSpace(q.Get("reason")),
		Source: typed(q.Get("source")), Key: typed(q.Get("key")), State: q.Get("state"),
		Flag: typed(q.Get("flag")), FlagState: typed(q.Get("flag_state")),
		Property: storage.Label(q.Get("property")), Booking: storage.Label(q.Get("booking")),
		Status: storage.Label(q.Get("status")), Currency: storage.CurrencyCode(q.Get("currency")),
		AmountMin: typed(q.Get("amount_min")), AmountMax: typed(q.Get("amount_max")),
	}
	if name := blankLabel(q.Get("property"), q.Get("booking"), q.Get("status")); name != "" {
		return v, storage.BulkFilter{}, badRequest("Filter: " + name + ": blanks alone would match every key; leave it empty for that.")
	}
	if raw := q.Get("key"); raw != "" && v.Key == "" {
		return v, storage.BulkFilter{}, badRequest("Filter: key: blanks alone would match every key; leave it empty for that.")
	}
	f := storage.BulkFilter{Source: v.Source, Key: v.Key, Property: v.Property, Booking: v.Booking, Status: v.Status,
		Currency: v.Currency, Flag: storage.SuspectKind(v.Flag), FlagState: v.FlagState,
		AmountMin: v.AmountMin, AmountMax: v.AmountMax}
	switch v.State {
	case "", "all":
	case "stuck":
		f.Stuck = true
	default:
		f.State = v.State
	}
	// Both bounds are read before either is refused: the form shows both again as they
	// were, and one left out would be a filter without that end once corrected.
	var fromErr, toErr error
	f.From, v.From, fromErr = s.timeBound(q, "from")
	f.To, v.To, toErr = s.timeBound(q, "to")
	if fromErr != nil {
		return v, f, badRequest("From must be a date and time like 2026-11-30T14:00.")
	}
	if toErr != nil {
		return v, f, badRequest("To must be a date and time like 2026-11-30T14:00.")
	}
	if err := checkTimeRange(q.Get("from"), q.Get("to"), f.From, f.To); err != nil {
		return v, f, badRequest("Filter: " + err.Error() + ".")
	}
	if err := f.Check(); err != nil {
		return v, f, badRequest("Filter: " + err.Error() + ".")
	}
	if err := s.checkBulkSource(f.Source); err != nil {
		return v, f, badRequest("Filter: " + err.Error() + ".")
	}
	return v, f, nil
}

// checkBulkSource refuses a source the server does not run: a mistyped name would
// preview no keys, as if there were nothing to do.
func (s *Server) checkBulkSource(name string) error {
	if _, ok := s.source(name); name == "" || ok || len(s.sources) == 0 {
		return nil
	}
	return fmt.Errorf("source %q: no such source (%s)", name, strings.Join(s.sourceNames(), ", "))
}

// checkReprocessSource refuses to reprocess a key of a source the server does not run:
// no dispatcher of this configuration would send it, and the key would wait in
// processing for one that has the source. Releasing it is still allowed: that frees a
// key whose source is gone.
func (s *Server) checkReprocessSource(name string) error {
	if _, ok := s.source(name); ok || len(s.sources) == 0 {
		return nil
	}
	return fmt.Errorf("source %q is not in this server's configuration, so nothing here would send a reprocessed key of it downstream: put the source back, or release the key instead", name)
}

// checkBulkRequest checks what storage would refuse, in words for the user.
func checkBulkRequest(kind, reason string) error {
	switch {
	case kind != storage.BulkRelease && kind != storage.BulkReprocess:
		return badRequest("Choose release or reprocess.")
	case reason == "":
		return badRequest("Give a reason: it goes to the audit log, on every key.")
	case reasonProblem(reason, true) != "":
		return badRequest(reasonProblem(reason, true))
	}
	return nil
}

func (s *Server) handleBulk(w http.ResponseWriter, r *http.Request) error {
	form, _, err := s.bulkFilterForm(r.URL.Query())
	v := views.Bulk{Page: s.page(r, "Bulk actions", "bulk"), Form: form, Sources: s.sourceNames()}
	if form.Kind == "" {
		v.Form.Kind = storage.BulkRelease
	}
	if err != nil {
		v.Error = errorMessage(err, http.StatusBadRequest, consoleWords)
	}
	u, _ := UserFrom(r.Context())
	v.CanAct = Allowed(u.Role, storage.RoleOperator)
	v.Thresholds = thresholdText(s.thresholds)
	actions, next, newest, err := s.bulkPage(r.Context(), "", bulkListed, "/bulk", r.URL.Query())
	if err != nil {
		return err
	}
	v.NextURL, v.NewestURL = next, newest
	for _, a := range actions {
		v.Actions = append(v.Actions, s.bulkRow(a))
	}
	// Counted apart from the page: those among the actions listed would leave out any
	// waiting behind them, and an approver would not look for them.
	if v.Pending, err = s.bulk.CountBulkActions(r.Context(), storage.BulkPendingApproval); err != nil {
		return err
	}
	code := http.StatusOK
	if v.Error != "" {
		code = http.StatusBadRequest
	}
	return s.render(w, r, code, views.BulkView(v))
}

// handleBulkPreview makes a preview of the form's action and shows it.
func (s *Server) handleBulkPreview(w http.ResponseWriter, r *http.Request) error {
	u, _ := UserFrom(r.Context())
	form, f, err := s.bulkFilterForm(r.PostForm)
	if err == nil {
		err = checkBulkRequest(form.Kind, form.Reason)
	}
	if err == nil {
		if serr := s.checkBulkSource(f.Source); serr != nil {
			err = badRequest("Filter: " + serr.Error() + ".")
		}
	}
	if err != nil {
		v := views.Bulk{Page: s.page(r, "Bulk actions", "bulk"), Form: form, Sources: s.sourceNames(), CanAct: true,
			Error: errorMessage(err, http.StatusBadRequest, consoleWords), Thresholds: thresholdText(s.thresholds)}
		return s.render(w, r, http.StatusBadRequest, views.BulkView(v))
	}
	a, err := s.bulk.CreateBulkPreview(r.Context(), storage.BulkRequest{Kind: form.Kind, Filter: f, Reason: form.Reason,
		Actor: u.Name, KeySources: s.sourceNames(), StuckBefore: s.now().Add(-s.stuck), Thresholds: s.thresholds})
	if err != nil {
		return bulkError(err)
	}
	http.Redirect(w, r, bulkURL(a.ID), http.StatusSeeOther)
	return nil
}

func bulkURL(id int64) string { return "/bulk/" + strconv.FormatInt(id, 10) }

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, Errorf(http.StatusNotFound, "There is no bulk action %q.", r.PathValue("id"))
	}
	return id, nil
}

func (s *Server) handleBulkAction(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	a, err := s.bulk.BulkAction(r.Context(), id)
	if err != nil {
		return err
	}
	sample, err := s.bulk.BulkSample(r.Context(), id)
	if err != nil {
		return err
	}
	u, _ := UserFrom(r.Context())
	operator := Allowed(u.Role, storage.RoleOperator)
	stale := a.Stale(s.now())
	v := views.BulkDetail{Page: s.page(r, fmt.Sprintf("Bulk action %d", a.ID), "bulk"), Row: s.bulkRow(a),
		Reason: a.Reason, Filter: s.describeFilter(a.Filter), Expired: a.Expired, NoAmount: a.NoAmount, Unreadable: a.Unreadable,
		NeedsApproval: a.NeedsApproval, Done: a.Done, Changed: a.Changed, Unchanged: a.Unchanged, Skipped: a.Skipped,
		Refused: a.Refused, LastError: a.LastError, DecidedBy: a.DecidedBy, DecisionReason: a.DecisionReason,
		CancelledBy: a.CancelledBy, CancelRequested: a.CancelRequested,
		Stale:      stale,
		CanStart:   operator && a.State == storage.BulkPreview && u.Name == a.RequestedBy && a.Total > 0 && !stale,
		CanCancel:  operator && !a.Finished() && !a.CancelRequested,
		CanDecide:  operator && a.State == storage.BulkPendingApproval && u.Name != a.RequestedBy,
		OwnPending: a.State == storage.BulkPendingApproval && u.Name == a.RequestedBy,
	}
	for _, m := range a.Money {
		v.Money = append(v.Money, views.BulkMoney{Currency: currencyLabel(m.Currency), Keys: m.Keys,
			Sum: groupDigits(m.Sum), Gross: groupDigits(m.Gross)})
	}
	if v.Over, err = s.overThresholds(r.Context(), a); err != nil {
		return err
	}
	if a.State == storage.BulkPreview && a.Kind == storage.BulkReprocess {
		v.NeedsApproval = len(v.Over) > 0 // as Start would decide now
	}
	for _, why := range []string{storage.LeftOutInFlight, storage.LeftOutFree, storage.LeftOutPayloadGone} {
		if n := a.LeftOut[why]; n > 0 {
			v.LeftOut = append(v.LeftOut, fmt.Sprintf("%d %s", n, leftOutWords[why]))
		}
	}
	if a.Total > 0 {
		v.Percent = a.Done * 100 / a.Total
	}
	for _, k := range sample {
		row := views.BulkKeyRow{Source: k.Source, Key: k.Key, KeyShort: shortKey(k.Key), State: k.State,
			Outcome: k.Outcome, URL: keyEventsURL(k.Source, k.Key)}
		if k.Amount != "" {
			row.Amount = strings.TrimSpace(k.Currency + " " + groupDigits(padPlaces(k.Amount, k.Currency)))
		}
		v.Sample = append(v.Sample, row)
	}
	if a.State == storage.BulkQueued || a.State == storage.BulkRunning {
		// Progress without JavaScript: the browser asks again.
		w.Header().Set("Refresh", "2")
	}
	return s.render(w, r, http.StatusOK, views.BulkDetailView(v))
}

// leftOutWords say why keys the filter matched are left out of an action.
var leftOutWords = map[string]string{
	storage.LeftOutInFlight:    "in flight (being handed downstream, not stuck yet)",
	storage.LeftOutFree:        "released already: nothing to release",
	storage.LeftOutPayloadGone: "whose payload is no longer stored (past the retention period): release them instead",
}

// handleBulkStep starts, cancels, approves or refuses an action (the path's last
// part), then shows it again.
func (s *Server) handleBulkStep(step string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		u, _ := UserFrom(r.Context())
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		a, err := s.bulkStep(r.Context(), step, id, u, reason)
		if _, gone := errors.AsType[*storage.ActorGoneError](err); gone {
			// The role change or removal that refused the step ended the user's
			// sessions too: a flash would be lost with this one, and the next page
			// would only say it ended. So the answer itself says why.
			return bulkError(err)
		}
		if err != nil {
			err = bulkError(err)
			var e *Error
			if errors.As(err, &e) && e.Code < 500 {
				flash(r, w, "error", e.Message)
				http.Redirect(w, r, bulkURL(id), http.StatusSeeOther)
				return nil
			}
			return err
		}
		flash(r, w, "ok", stepWords(step, a))
		http.Redirect(w, r, bulkURL(id), http.StatusSeeOther)
		return nil
	}
}

// bulkStep does one step of an action for u, for the console and the API alike; each
// words storage's refusals in its own way (bulkError, apiBulkError).
func (s *Server) bulkStep(ctx context.Context, step string, id int64, u User, reason string) (storage.BulkAction, error) {
	if p := reasonProblem(reason, step == "approve" || step == "refuse"); p != "" {
		return storage.BulkAction{}, badRequest(p)
	}
	var a storage.BulkAction
	var err error
	if step == "start" || step == "approve" {
		if err := s.reprocessSourcesRun(ctx, id); err != nil {
			return storage.BulkAction{}, err
		}
	}
	switch step {
	case "start":
		a, err = s.bulk.StartBulkAction(ctx, id, u.Name, s.thresholds)
	case "cancel":
		a, err = s.bulk.CancelBulkAction(ctx, id, u.Name, reason)
	case "approve":
		a, err = s.bulk.ApproveBulkAction(ctx, id, u.Name, reason)
	case "refuse":
		a, err = s.bulk.RefuseBulkAction(ctx, id, u.Name, reason)
	default:
		return storage.BulkAction{}, errNotFound
	}
	if err != nil {
		return storage.BulkAction{}, err // worded by the caller: bulkError, apiBulkError
	}
	s.log.Info("bulk action", logBy, u.Name, logAction, step, "bulk", id, "state", a.State)
	return a, nil
}

// reprocessSourcesRun refuses to start or approve action id, a reprocess, while a key
// of it belongs to a source this server's configuration no longer has (it was removed
// and the server restarted since the preview): queued, such a key would wait in
// processing for a dispatcher that nothing here starts, as a reprocess of the key alone
// would (checkReprocessSource). A release goes ahead: it frees keys of any source.
func (s *Server) reprocessSourcesRun(ctx context.Context, id int64) error {
	if len(s.sources) == 0 {
		return nil
	}
	a, err := s.bulk.BulkAction(ctx, id)
	if err != nil || a.Kind != storage.BulkReprocess {
		return bulkError(err)
	}
	sources := []string{a.Filter.Source}
	if a.Filter.Source == "" {
		// The sources alone: the action may hold MaxBulkKeys keys, each read only to
		// learn its source.
		if sources, err = s.bulk.BulkSources(ctx, id); err != nil {
			return err
		}
	}
	for _, name := range sources {
		if err := s.checkReprocessSource(name); err != nil {
			return Errorf(http.StatusConflict, "Not reprocessed: %s. Refuse or cancel this action, then make a new preview.",
				strings.Replace(err.Error(), "or release the key instead", "or release its keys instead", 1))
		}
	}
	return nil
}

func stepWords(step string, a storage.BulkAction) string {
	switch {
	case step == "start" && a.State == storage.BulkPendingApproval:
		return "Waiting for a second operator's approval: the money is above the approval threshold."
	case step == "start":
		return fmt.Sprintf("Started: %d key%s to %s.", a.Total, plural(a.Total), a.Kind)
	case step == "approve":
		return "Approved: the action runs now."
	case step == "refuse":
		return "Refused: nothing will run."
	case a.CancelRequested && a.State == storage.BulkRunning:
		return "Cancelling: the action stops before its next batch."
	}
	return "Cancelled."
}

func (s *Server) handleBulkPending(w http.ResponseWriter, r *http.Request) error {
	actions, next, newest, err := s.bulkPage(r.Context(), storage.BulkPendingApproval, bulkPendingListed, "/bulk/pending", r.URL.Query())
	if err != nil {
		return err
	}
	v := views.BulkPending{Page: s.page(r, "Pending approvals", "bulk"), NextURL: next, NewestURL: newest}
	if v.Total, err = s.bulk.CountBulkActions(r.Context(), storage.BulkPendingApproval); err != nil {
		return err
	}
	for _, a := range actions {
		v.Rows = append(v.Rows, s.bulkRow(a))
	}
	return s.render(w, r, http.StatusOK, views.BulkPendingView(v))
}

// bulkStates are the states of an action in words.
var bulkStates = map[string]string{
	storage.BulkPreview:         "preview",
	storage.BulkPendingApproval: "waiting for approval",
	storage.BulkQueued:          "queued",
	storage.BulkRunning:         "running",
	storage.BulkDone:            "done",
	storage.BulkCancelled:       "cancelled",
	storage.BulkRefused:         "refused",
}

func (s *Server) bulkRow(a storage.BulkAction) views.BulkRow {
	row := views.BulkRow{ID: a.ID, URL: bulkURL(a.ID), Kind: a.Kind, State: a.State, StateLabel: bulkStates[a.State],
		RequestedBy: a.RequestedBy, Created: s.shortTime(a.CreatedAt), CreatedTitle: s.fullTime(a.CreatedAt),
		Total: a.Total, Progress: fmt.Sprintf("%d / %d", a.Done, a.Total)}
	if a.CancelRequested && a.State == storage.BulkRunning {
		row.StateLabel = "cancelling"
	}
	for _, m := range a.Money {
		row.Money = append(row.Money, views.MoneySum{Currency: currencyLabel(m.Currency), Sum: views.Sum{Amount: groupDigits(m.Gross)}})
	}
	return row
}

// groupDigits writes an exact decimal amount ("-12345.50") with thousands separators.
// Anything else is returned as it is: an amount is stored as the payload sent it, and
// separators put into "1234,50" would show money the payload never held.
func groupDigits(amount string) string {
	if _, _, ok := storage.ParseDecimal(amount); !ok {
		return amount
	}
	sign, digits := "", amount
	if rest, ok := strings.CutPrefix(digits, "-"); ok {
		sign, digits = "-", rest
	}
	whole, frac, dot := strings.Cut(digits, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := sign + b.String()
	if dot {
		out += "." + frac
	}
	return out
}

// padPlaces writes a plain decimal amount with at least its currency's decimal places
// ("700.5" EUR: "700.50"); anything else is returned as it is.
func padPlaces(amount, currency string) string {
	whole, frac, _ := strings.Cut(amount, ".")
	want := storage.CurrencyExponent(currency)
	if whole == "" || len(frac) >= want || strings.Trim(strings.TrimPrefix(whole, "-"), "0123456789") != "" ||
		strings.Trim(frac, "0123456789") != "" {
		return amount
	}
	return whole + "." + frac + strings.Repeat("0", want-len(frac))
}

// describeFilter is a filter in words, one condition a line.
func (s *Server) describeFilter(f storage.BulkFilter) []string {
	var out []string
	add := func(label, v string) {
		if v != "" {
			out = append(out, label+": "+v)
		}
	}
	add("source", f.Source)
	add("key", f.Key)
	add("state", f.State)
	if f.Stuck {
		out = append(out, "stuck")
	}
	if !f.From.IsZero() {
		add("claimed from", s.fullTime(f.From))
	}
	if !f.To.IsZero() {
		add("claimed before", s.fullTime(f.To))
	}
	add("property", f.Property)
	add("booking", f.Booking)
	add("status", f.Status)
	add("currency", f.Currency)
	switch {
	case f.Flag == storage.FlagAny || (f.Flag == "" && f.FlagState != ""):
		out = append(out, "first delivery flagged")
	case f.Flag != "":
		out = append(out, "first delivery flagged: "+string(f.Flag))
	}
	add("flag's review state", f.FlagState)
	add("amount, either sign, at least", f.AmountMin)
	add("amount, either sign, at most", f.AmountMax)
	if len(out) == 0 {
		out = append(out, "every key")
	}
	return out
}

// thresholdText lists the approval thresholds in words, in the order of their codes.
func thresholdText(t storage.ApprovalThresholds) []string {
	var out []string
	for _, code := range slices.Sorted(maps.Keys(t)) {
		label := code
		if code == "*" {
			label = "any other currency"
		}
		out = append(out, label+" "+groupDigits(t[code]))
	}
	return out
}

// The JSON API's bulk actions.

// apiBulkRequest is the body of POST /api/v1/bulk.
type apiBulkRequest struct {
	Kind   string             `json:"kind"`
	Reason string             `json:"reason"`
	Filter storage.BulkFilter `json:"filter"`
}

// apiBulkAction is a bulk action as the API shows it.
type apiBulkAction struct {
	ID            string               `json:"id"`
	Kind          string               `json:"kind"`
	State         string               `json:"state"`
	Filter        storage.BulkFilter   `json:"filter"`
	Reason        string               `json:"reason"`
	RequestedBy   string               `json:"requested_by"`
	Total         int                  `json:"total"`
	Money         []storage.MoneyTotal `json:"money"`
	NoAmount      int                  `json:"no_amount"`
	Unreadable    int                  `json:"unreadable_amounts,omitempty"`
	LeftOut       map[string]int       `json:"left_out"`
	Expired       int                  `json:"expired"`
	NeedsApproval bool                 `json:"needs_approval"`
	Done          int                  `json:"done"`
	Changed       int                  `json:"changed"`
	Unchanged     int                  `json:"unchanged"`
	Skipped       int                  `json:"skipped"`
	Refused       int                  `json:"refused"`
	LastError     string               `json:"last_error,omitempty"`
	DecidedBy     string               `json:"decided_by,omitempty"`
	Decision      string               `json:"decision_reason,omitempty"`
	CancelledBy   string               `json:"cancelled_by,omitempty"`
	Cancelling    bool                 `json:"cancel_requested,omitempty"`
	CreatedAt     time.Time            `json:"created_at"`
	StartedAt     time.Time            `json:"started_at,omitzero"`
	DecidedAt     time.Time            `json:"decided_at,omitzero"`
	FinishedAt    time.Time            `json:"finished_at,omitzero"`
	Sample        []apiBulkKey         `json:"sample,omitempty"`
}

type apiBulkKey struct {
	Source   string `json:"source"`
	Key      string `json:"key"`
	State    string `json:"state"`
	Amount   string `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
}

func toAPIBulk(a storage.BulkAction) apiBulkAction {
	out := apiBulkAction{ID: strconv.FormatInt(a.ID, 10), Kind: a.Kind, State: a.State, Filter: a.Filter, Reason: a.Reason,
		RequestedBy: a.RequestedBy, Total: a.Total, Money: a.Money, NoAmount: a.NoAmount, Unreadable: a.Unreadable,
		LeftOut: a.LeftOut, Expired: a.Expired, NeedsApproval: a.NeedsApproval, Done: a.Done, Changed: a.Changed, Unchanged: a.Unchanged,
		Skipped: a.Skipped, Refused: a.Refused, LastError: a.LastError, DecidedBy: a.DecidedBy, Decision: a.DecisionReason,
		CancelledBy: a.CancelledBy, Cancelling: a.CancelRequested, CreatedAt: a.CreatedAt, StartedAt: a.StartedAt,
		DecidedAt: a.DecidedAt, FinishedAt: a.FinishedAt}
	if out.Money == nil {
		out.Money = []storage.MoneyTotal{}
	}
	return out
}

func (a *api) createBulk(w http.ResponseWriter, r *http.Request) error {
	var req apiBulkRequest
	if err := decodeBody(w, r, &req, `{"kind":"release"|"reprocess","reason":…,"filter":{"source":…,"stuck":true,…}}`); err != nil {
		return err
	}
	if req.Kind != storage.BulkRelease && req.Kind != storage.BulkReprocess {
		return Errorf(http.StatusBadRequest, "kind %q: want release or reprocess", req.Kind)
	}
	req.Reason = strings.TrimSpace(req.Reason)
	// Labels are matched as they are stored, as the console's filters match them.
	f := &req.Filter
	if name := blankLabel(f.Property, f.Booking, f.Status); name != "" {
		return Errorf(http.StatusBadRequest, "filter: %s: blank; leave it out to match every key", name)
	}
	f.Property, f.Booking, f.Status = storage.Label(f.Property), storage.Label(f.Booking), storage.Label(f.Status)
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	if err := checkTimeRange(boundText(f.From), boundText(f.To), f.From, f.To); err != nil {
		return Errorf(http.StatusBadRequest, "filter: %s", err)
	}
	if err := req.Filter.Check(); err != nil {
		return Errorf(http.StatusBadRequest, "filter: %v", err)
	}
	if err := a.checkBulkSource(req.Filter.Source); err != nil {
		return Errorf(http.StatusBadRequest, "filter: %v", err)
	}
	u, _ := UserFrom(r.Context())
	act, err := a.bulk.CreateBulkPreview(r.Context(), storage.BulkRequest{Kind: req.Kind, Filter: req.Filter, Reason: req.Reason,
		Actor: u.Name, KeySources: a.sourceNames(), StuckBefore: a.now().Add(-a.stuck), Thresholds: a.thresholds})
	if err != nil {
		return apiBulkError(err)
	}
	return a.writeBulk(w, r, http.StatusCreated, act)
}

// boundText is a bulk filter's bound as checkTimeRange takes its text: "" for none. The
// zero time, which a client's own unset time may be sent as, stays no bound.
func boundText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// apiBulkError words bulkError's refusals for the API.
func apiBulkError(err error) error {
	switch {
	case errors.Is(err, storage.ErrSelfApproval):
		return Errorf(http.StatusForbidden, "you requested this action: a second operator must approve or refuse it")
	case errors.Is(err, storage.ErrNotRequester):
		return Errorf(http.StatusForbidden, "only the operator who made the preview can start it")
	case errors.Is(err, storage.ErrBulkState):
		return Errorf(http.StatusConflict, "the action's state does not allow this")
	case errors.Is(err, storage.ErrPreviewStale):
		return Errorf(http.StatusConflict, "the preview was made more than a day ago; make a new preview")
	case errors.Is(err, storage.ErrTooManyKeys):
		return Errorf(http.StatusUnprocessableEntity, "the filter matches more than %d keys; narrow it", storage.MaxBulkKeys)
	}
	if gone, ok := errors.AsType[*storage.RequesterGoneError](err); ok {
		return Errorf(http.StatusConflict, "the action cannot be approved: %s; refuse it, and ask again under a current operator's name", gone)
	}
	if gone, ok := errors.AsType[*storage.ActorGoneError](err); ok {
		if gone.Role == "" {
			return Errorf(http.StatusForbidden, "the token's user can no longer %s actions: %s was removed; nothing was changed", gone.Verb, gone.Name)
		}
		return Errorf(http.StatusForbidden, "the token's user can no longer %s actions: %s is a %s now, and only operators and admins can; nothing was changed", gone.Verb, gone.Name, gone.Role)
	}
	var e *Error
	if errors.As(err, &e) {
		return Errorf(e.Code, "%s", strings.TrimSuffix(strings.ToLower(e.Message[:1])+e.Message[1:], "."))
	}
	return err
}

// writeBulk answers an action with its sample of keys.
func (a *api) writeBulk(w http.ResponseWriter, r *http.Request, code int, act storage.BulkAction) error {
	out := toAPIBulk(act)
	sample, err := a.bulk.BulkSample(r.Context(), act.ID)
	if err != nil {
		return err
	}
	for _, k := range sample {
		out.Sample = append(out.Sample, apiBulkKey{Source: k.Source, Key: k.Key, State: k.State, Amount: k.Amount,
			Currency: k.Currency, Outcome: k.Outcome})
	}
	writeAPI(w, code, out)
	return nil
}

func (a *api) getBulk(w http.ResponseWriter, r *http.Request) error {
	id, err := apiPathID(r, "bulk action")
	if err != nil {
		return err
	}
	act, err := a.bulk.BulkAction(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return noSuchID("bulk action", id)
	}
	if err != nil {
		return err
	}
	return a.writeBulk(w, r, http.StatusOK, act)
}

// bulkAPIListed bounds the actions a page of GET /api/v1/bulk and /api/v1/bulk/pending
// answers, the newest below its before.
const bulkAPIListed = 200

func (a *api) listBulk(state string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		st := state
		if st == "" {
			st = q.Get("state")
			if _, ok := bulkStates[st]; st != "" && !ok {
				return Errorf(http.StatusBadRequest, "state %q: want preview, pending_approval, queued, running, done, cancelled or refused", st)
			}
		}
		before, err := apiID(q, "before")
		if err != nil {
			return err
		}
		// One more than listed tells whether there are older ones: a list cut without a
		// word reads as every action there is.
		acts, err := a.bulk.BulkActions(r.Context(), st, before, bulkAPIListed+1)
		if err != nil {
			return err
		}
		out := struct {
			Actions []apiBulkAction `json:"actions"`
			// More: older actions were left out; Next reads them.
			More bool   `json:"more,omitempty"`
			Next string `json:"next,omitempty"` // pass as before= for the next page
		}{Actions: []apiBulkAction{}}
		if len(acts) > bulkAPIListed {
			acts = acts[:bulkAPIListed]
			out.More, out.Next = true, strconv.FormatInt(acts[len(acts)-1].ID, 10)
		}
		for _, act := range acts {
			out.Actions = append(out.Actions, toAPIBulk(act))
		}
		writeAPI(w, http.StatusOK, out)
		return nil
	}
}

func (a *api) bulkStepAPI(step string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := apiPathID(r, "bulk action")
		if err != nil {
			return err
		}
		var body struct {
			Reason string `json:"reason"`
		}
		if err := decodeOptionalBody(w, r, &body, `{"reason":…} or nothing`); err != nil {
			return err
		}
		if step == "start" && body.Reason != "" {
			// A start records no reason (the preview's is the action's): one sent along
			// would be dropped without a word, and the caller believe it recorded.
			return Errorf(http.StatusBadRequest, "reason: a start takes none (an action's reason is its preview's, given to POST /api/v1/bulk); send {} or nothing")
		}
		u, _ := UserFrom(r.Context())
		act, err := a.bulkStep(r.Context(), step, id, u, strings.TrimSpace(body.Reason))
		if errors.Is(err, storage.ErrNotFound) {
			return noSuchID("bulk action", id)
		}
		if err != nil {
			return apiBulkError(err)
		}
		return a.writeBulk(w, r, http.StatusOK, act)
	}
}

// bulkFromEvents is the bulk page for the keys of the events vf lists, or "" and why
// there is none. A bulk filter reads a key's first delivery, the accepted one that
// claimed it: the events list's key, flag (only accepted deliveries are flagged),
// property, booking, status and currency carry over, and an outcome of accepted
// selects the same keys as none. A duplicate, a mismatch, a rejection or a batch's
// item is a later or another delivery, which no bulk filter reads: left out, the
// action would take in every key whose first delivery matches the rest, far more than
// the list shows. No bulk filter selects the keys without a property or a currency
// either: left out, those would widen the action to every property or currency. Nor
// the keys whose delivery carries an amount: the bulk filter's amount range matches
// plain decimals only, so a range leaves out an amount like 12,50 that the list shows,
// and without one the action takes in the keys that carry none. From and To carry
// over, though they bound when a key was claimed there (the bulk page says so): at
// most fewer keys, never more.
func bulkFromEvents(vf views.DeliveryFilter) (link, whyNot string) {
	var cannot []string
	switch vf.Outcome {
	case "duplicate", "rejected":
		cannot = append(cannot, "outcome "+vf.Outcome)
	}
	if vf.Mismatch || vf.MoneyMismatch {
		cannot = append(cannot, "mismatch")
	}
	if vf.Batch != "" {
		cannot = append(cannot, "batch")
	}
	if vf.NoProperty {
		cannot = append(cannot, "property: none")
	}
	if vf.NoCurrency {
		cannot = append(cannot, "currency: none")
	}
	if vf.Amount != "" {
		cannot = append(cannot, "amount: "+vf.Amount)
	}
	if len(cannot) > 0 {
		return "", "A bulk action selects keys by their first, accepted delivery; this list is filtered by " +
			strings.Join(cannot, " and ") + ", which no bulk filter reads, so a bulk action from here would act on more keys " +
			"than it shows. Filter by key, flag, property, booking, status or currency to act on these events' keys."
	}
	q := url.Values{}
	for _, p := range [][2]string{{"source", vf.Source}, {"key", vf.Key}, {"property", vf.Property}, {"booking", vf.Booking},
		{"status", vf.Status}, {"currency", vf.Currency}, {"flag", vf.Flag}, {"flag_state", vf.FlagState},
		{"from", vf.From.Param()}, {"to", vf.To.Param()}} {
		if p[1] != "" {
			q.Set(p[0], p[1])
		}
	}
	return "/bulk?" + q.Encode(), ""
}
