package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// keyStore is what the keys page, the key lab, release and the API's keys ask of
// storage.
type keyStore interface {
	Keys(ctx context.Context, f storage.KeyFilter) (storage.KeyPage, error)
	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)
	// Claim returns ErrNotFound if the key was never claimed or its row was swept.
	Claim(ctx context.Context, source, key string) (storage.Claim, error)
	// LastAttempt returns ErrNotFound if no attempt was made.
	LastAttempt(ctx context.Context, source, key string) (storage.Attempt, error)
	// ReleaseKey returns ErrNotFound for an unknown key and ErrBusy for a key in flight;
	// it and ReleaseKeys and ReleaseEach return a *storage.NeedsApprovalError for a
	// reprocess whose money is above r.Thresholds, with nothing changed.
	ReleaseKey(ctx context.Context, r storage.Release) (storage.Released, error)
	// ReleaseKeys and ReleaseEach give each key its outcome (ErrNotFound, ErrBusy);
	// their error is a failed transaction, after the outcomes committed before it.
	ReleaseKeys(ctx context.Context, f storage.KeyFilter, r storage.Release) ([]storage.KeyOutcome, error)
	ReleaseEach(ctx context.Context, keys []storage.KeyRef, r storage.Release) ([]storage.KeyOutcome, error)
}

// keyTabs are the keys page's listings, stuck first.
var keyTabs = []struct{ name, label string }{
	{"stuck", "Stuck"},
	{storage.StateProcessing, "Processing"},
	{storage.StateFailed, "Failed"},
	{storage.StateProcessed, "Processed"},
	{storage.StateReleased, "Released"},
	{"all", "All"},
}

// maxKeysPerForm bounds the keys one release from the console names. The stuck tab
// lists as many a page, so that a page's keys can all go in one release.
const maxKeysPerForm = 500

func (s *Server) handleKeys(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	q := r.URL.Query()
	tab := q.Get("state")
	if tab == "" {
		tab = "stuck"
	}
	source := q.Get("source")
	now := s.now()
	stuckBefore := now.Add(-s.stuck)
	f := storage.KeyFilter{Source: source, StuckBefore: stuckBefore, Limit: 100}
	switch tab {
	case "stuck":
		f.Stuck, f.Limit = true, maxKeysPerForm
	case "all":
	case storage.StateProcessing, storage.StateFailed, storage.StateProcessed, storage.StateReleased:
		f.State = tab
	default:
		return badRequest("Unknown state: choose stuck, processing, failed, processed, released or all.")
	}
	switch problem, err := s.unknownSource(ctx, source); {
	case err != nil:
		return err
	case problem != "":
		return badRequest(problem)
	}
	// A stuck listing goes on from after, the others from before: the other one, from a
	// link made by hand or a tab changed in the address, would be dropped without a word
	// and the page start again from the top.
	if b := q.Get("before"); b != "" && f.Stuck {
		return cursorError("before", b, "does not go with the stuck keys, which go on from after")
	}
	if a := q.Get("after"); a != "" && !f.Stuck {
		return cursorError("after", a, "goes with the stuck keys only; the other tabs go on from before")
	}
	var err error
	if f.Before, err = pageBefore(q); err != nil {
		return err
	}
	if a := q.Get("after"); a != "" {
		c, err := storage.ParseKeyCursor(a)
		if err != nil {
			return cursorError("after", a, "is not a place in the stuck keys")
		}
		f.After, f.StuckBefore = c, c.StuckBefore
	}
	page, err := s.keys.Keys(ctx, f)
	if err != nil {
		return err
	}
	counts, err := s.keys.StuckCounts(ctx, stuckBefore)
	if err != nil {
		return err
	}
	stuck := storage.StuckOf(counts, source)
	// A pass through the stuck keys keeps its first page's threshold (KeyCursor); the
	// keys that passed it since fall among those already paged, and its last page says
	// how many there are, from the first page.
	becameStuck := 0
	if f.Stuck && !f.After.IsZero() && page.After.IsZero() {
		then, err := s.keys.StuckCounts(ctx, f.StuckBefore)
		if err != nil {
			return err
		}
		becameStuck = storage.BecameStuck(counts, then, source)
	}
	u, _ := UserFrom(ctx)
	v := views.Keys{
		Page:        s.page(r, "Keys", "keys"),
		Tab:         tab,
		Source:      source,
		Sources:     s.sourceNames(),
		CanRelease:  Allowed(u.Role, storage.RoleOperator),
		Return:      r.URL.RequestURI(),
		Partial:     page.Partial,
		BecameStuck: becameStuck,
	}
	for _, t := range keyTabs {
		tq := url.Values{"state": {t.name}}
		if source != "" {
			tq.Set("source", source)
		}
		label := t.label
		if t.name == "stuck" {
			label = fmt.Sprintf("%s (%d)", label, stuck)
		}
		v.Tabs = append(v.Tabs, views.Link{Label: label, URL: "/keys?" + tq.Encode(), Active: t.name == tab})
	}
	for _, c := range page.Keys {
		row := views.KeyRow{
			Value: c.Source + "/" + c.Key, Source: c.Source, Key: c.Key, KeyShort: shortKey(c.Key),
			State: c.State, Attempts: c.Attempts,
			Stuck:      c.Stuck(stuckBefore),
			InFlight:   c.InFlight(now),
			Since:      s.ago(c.UpdatedAt),
			SinceTitle: s.fullTime(c.UpdatedAt),
			LastError:  c.LastError,
		}
		if c.FirstDelivery != 0 {
			row.EventURL = eventURL(c.FirstDelivery)
		}
		if c.MayOwnAttempt() {
			a, err := s.keys.LastAttempt(ctx, c.Source, c.Key)
			switch {
			case err == nil && !c.OwnsAttempt(a): // an earlier claim's, or from before a reprocess
			case err == nil:
				row.LastStatus = "HTTP " + strconv.Itoa(a.Status)
				switch {
				case a.Error == storage.AttemptInterrupted:
					row.LastStatus = "interrupted"
				case a.Status == 0:
					row.LastStatus = "no answer"
				}
				if row.LastError == "" {
					row.LastError = a.Error
				}
			case !errors.Is(err, storage.ErrNotFound):
				return err
			}
		}
		v.Rows = append(v.Rows, row)
	}
	// The listing's tab and source: its pages keep them, and a bulk action starts from
	// them.
	pq := url.Values{"state": {tab}}
	if source != "" {
		pq.Set("source", source)
	}
	pages := newPager("/keys", pq)
	switch {
	case page.Next != 0:
		v.NextURL = pages.before(page.Next)
	case !page.After.IsZero():
		v.NextURL = pages.after(page.After.String())
	}
	// Shown on an empty page too: the keys after a stuck page's cursor may all have
	// been released since.
	if f.Before != 0 || !f.After.IsZero() {
		v.FirstURL = pages.newest()
	}
	if v.CanRelease {
		v.BulkURL = "/bulk?" + pq.Encode()
	}
	switch {
	case !f.After.IsZero():
		v.Empty = "No more stuck keys"
		v.PastLast = true
	case tab == "stuck":
		v.Empty = "No stuck keys"
	case tab == "all":
		v.Empty = "No keys yet"
	default:
		v.Empty = "No " + tab + " keys"
	}
	return s.render(w, r, http.StatusOK, views.KeysView(v))
}

// handleRelease releases, or reprocesses, one or more keys ("k" = "source/key"), with a
// required reason that goes to the audit log, then goes back where the form was.
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u, _ := UserFrom(ctx)
	back := localPath(r.PostFormValue("return"), "/keys")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	action := r.PostFormValue("action")
	keys := r.PostForm["k"]
	switch {
	case action != "release" && action != "reprocess":
		return badRequest("Choose release or reprocess.")
	case len(keys) == 0:
		flash(r, w, "error", "Select at least one key.")
	case len(keys) > maxKeysPerForm:
		flash(r, w, "error", fmt.Sprintf("Release at most %d keys at once.", maxKeysPerForm))
	case reasonProblem(reason, true) != "":
		flash(r, w, "error", reasonProblem(reason, true))
	default:
		refs := make([]storage.KeyRef, len(keys))
		for i, k := range keys {
			source, key, ok := strings.Cut(k, "/")
			if !ok || source == "" || key == "" {
				return badRequest("A key to release is malformed.")
			}
			if action == "reprocess" {
				if err := s.checkReprocessSource(source); err != nil {
					msg := err.Error()
					flash(r, w, "error", strings.ToUpper(msg[:1])+msg[1:]+".")
					http.Redirect(w, r, back, http.StatusSeeOther)
					return nil
				}
			}
			refs[i] = storage.KeyRef{Source: source, Key: key}
		}
		outcomes, err := s.keys.ReleaseEach(ctx, refs, storage.Release{Actor: u.Name, Reason: reason,
			Reprocess: action == "reprocess", StuckBefore: s.now().Add(-s.stuck), Thresholds: s.thresholds})
		if over, ok := errors.AsType[*storage.NeedsApprovalError](err); ok {
			flash(r, w, "error", needsApprovalWords(over))
			http.Redirect(w, r, back, http.StatusSeeOther)
			return nil
		}
		for _, o := range outcomes {
			if o.Changed {
				s.log.Info("key released", logBy, u.Name, logSource, o.Source, logKey, o.Key, logAction, action, logFrom, o.Previous)
			}
		}
		if err != nil {
			return err
		}
		sum := storage.Summarize(outcomes)
		verb := "Released"
		if action == "reprocess" {
			verb = "Reprocessing"
			if sum.Changed > 0 {
				s.wake()
			}
		}
		msg := fmt.Sprintf("%s %d key%s.", verb, sum.Changed, plural(sum.Changed))
		kind := "ok"
		if sum.Unchanged > 0 {
			msg += fmt.Sprintf(" %d already free: nothing changed.", sum.Unchanged)
		}
		if n := sum.Refusals[storage.RefusedBusy]; n > 0 {
			msg += fmt.Sprintf(" %d still being handed downstream (not stuck yet, or an attempt under way): left alone; try again later.", n)
		}
		if n := sum.Refusals[storage.RefusedNotFound]; n > 0 {
			gone := "no longer exist"
			if n == 1 {
				gone = "no longer exists"
			}
			msg += fmt.Sprintf(" %d %s (expired and swept).", n, gone)
		}
		if n := sum.Refusals[storage.RefusedPayloadGone]; n > 0 {
			msg += fmt.Sprintf(" %d cannot be reprocessed: the payload is no longer stored (past the retention period); release instead, so that the next delivery is accepted.", n)
		}
		if sum.Refused > 0 {
			kind = "error"
		}
		flash(r, w, kind, msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// handleLab derives the key of a pasted payload for a chosen source (GET shows the form).
func (s *Server) handleLab(w http.ResponseWriter, r *http.Request) error {
	v := views.Lab{Page: s.page(r, "Key lab", "lab"), Sources: s.sourceNames()}
	if len(v.Sources) > 0 {
		v.Source = v.Sources[0]
	}
	if r.Method != http.MethodPost {
		if src := r.URL.Query().Get("source"); src != "" {
			v.Source = src
		}
		return s.render(w, r, http.StatusOK, views.LabView(v))
	}
	// The form was read by the CSRF check, within the console's bound (maxFormBytes).
	v.Source, v.Payload, v.Headers = r.PostFormValue("source"), r.PostFormValue("payload"), r.PostFormValue("headers")
	if len(v.Payload) > 1<<20 {
		return badRequest("The payload is too large for the lab (1 MiB at most).")
	}
	if _, ok := s.source(v.Source); !ok {
		return badRequest("Pick one of the configured sources.")
	}
	h := http.Header{}
	for line := range strings.SplitSeq(v.Headers, "\n") {
		// Trimmed as net/http trims a header it receives: spaces and tabs only, so that
		// an id ending in U+00A0 gets the key intake would give it.
		name, value, ok := strings.Cut(strings.Trim(line, " \t\r"), ":")
		if ok && strings.TrimSpace(name) != "" {
			h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)), strings.Trim(value, " \t"))
		}
	}
	if s.maxBody > 0 && int64(len(v.Payload)) > s.maxBody {
		// As intake checks it, after the source and before anything else.
		v.Error = fmt.Sprintf("The payload is %d bytes, over max_body (%d bytes): intake would answer 413 and key nothing.", len(v.Payload), s.maxBody)
		return s.render(w, r, http.StatusOK, views.LabView(v))
	}
	src, _ := s.source(v.Source)
	// The events intake would key, each on its own: a form's payload field, a batch's
	// items; what intake would refuse before keying any is the lab's answer.
	events, err := s.eventsOf(v.Source, h, []byte(v.Payload))
	if err != nil {
		v.Error = err.Error()
		if src.Batch != "" {
			v.Error = "batch: " + v.Error
		}
		return s.render(w, r, http.StatusOK, views.LabView(v))
	}
	v.Batch = src.Batch
	// Each event is keyed once, before any is shown: intake refuses a request whole for
	// its first item that it cannot key, and claims none of its items, so what the lab
	// would foresee of the others would not happen.
	ders := make([]labDerivation, len(events))
	refused := false
	for i, event := range events {
		d := &ders[i]
		d.Derivation, d.err = s.derive(src.Name, h, event)
		if d.err != nil && src.Batch != "" && !refused {
			v.Refused = fmt.Sprintf("item %d: %s", i, d.err)
			refused = true
		}
	}
	first := map[string]int{} // the item each key was first derived in
	firstBusiness := storage.FirstAccepted{}
	probes := make([]storage.Probe, 0, len(events))
	for i, event := range events {
		res, p, err := s.labEvent(r.Context(), src, h, event, ders[i], refused)
		if err != nil {
			return err
		}
		if refused {
			v.Results = append(v.Results, res)
			continue
		}
		probes = append(probes, p)
		// Intake claims a key with the first item that has it, in one transaction: a
		// later item of the request is that one's duplicate, compared with it. An
		// item whose key the database holds is, like the first, a duplicate of the
		// delivery that holds it, and compared with that one.
		if k := res.Derivation.Key; k != "" {
			if j, ok := first[k]; !ok {
				first[k] = i
			} else if !v.Results[j].Held {
				res.Held, res.Blocked, res.Flags, res.Foreseen = true, false, nil, false
				res.Claim = fmt.Sprintf("Item %d of this request has the same key, and claims it first: this item would be a duplicate of it.", j)
				if v.Results[j].Blocked {
					res.Claim = fmt.Sprintf("Item %d of this request has the same key and is blocked: this item would be a duplicate of the delivery it repeats, compared with item %d.", j, j)
				}
				if p.Source != "" && probes[j].Source != "" {
					res.Flags, res.Foreseen = labDuplicateOfItem(j, probes[j], p), true
				}
			}
		}
		labBusinessInBatch(&res, p, i, firstBusiness)
		v.Results = append(v.Results, res)
	}
	return s.render(w, r, http.StatusOK, views.LabView(v))
}

// labDerivation is an event's key as the lab derived it, or why it has none.
type labDerivation struct {
	storage.Derivation
	err error
}

// labEvent shows the key derived of one event of a pasted delivery to src, says whether
// it is claimed now, and foresees what a delivery of it would be flagged as; refused says
// that intake refuses the event's request whole, so that nothing is foreseen of it.
// It returns the probe the look-up was made for, its Source "" when there was none.
func (s *Server) labEvent(ctx context.Context, src Source, h http.Header, event []byte, der labDerivation, refused bool) (views.LabResult, storage.Probe, error) {
	var probe storage.Probe
	d, err := der.Derivation, der.err
	res := &views.LabResult{PayloadHash: d.PayloadHash}
	res.Derivation = viewDerivation(d, src, true)
	if err != nil {
		res.Error = err.Error()
		res.Derivation.Key = ""
	} else {
		claim, err := s.keys.Claim(ctx, src.Name, d.Key)
		now := s.now()
		// What a delivery sent now would be; in a request that intake refuses whole,
		// nothing.
		accepted, again := "one sent now would be accepted", "a delivery sent now would be accepted"
		duplicate := "a delivery of this payload now would be a duplicate"
		if refused {
			accepted = "this request would not claim it, as intake refuses it whole"
			again, duplicate = accepted, "this request would not be stored as its duplicate, as intake refuses it whole"
		}
		switch {
		case errors.Is(err, storage.ErrNotFound):
			res.Claim = "No delivery holds this key: " + accepted + "."
		case err != nil:
			return views.LabResult{}, probe, err
		case claim.Held(now):
			res.Held, res.ClaimState = true, claim.State
			until := "until " + s.fullTime(claim.ExpiresAt)
			if !claim.ExpiresAt.After(now) {
				until = "while it is handed downstream (its ttl ended " + s.fullTime(claim.ExpiresAt) + ")"
			}
			res.Claim = fmt.Sprintf("Claimed (%s) %s: %s.", claim.State, until, duplicate)
			res.EventsURL = keyEventsURL(src.Name, d.Key)
		default:
			res.ClaimState = claim.State
			res.Claim = "Claimed before, but " + map[bool]string{true: "released", false: "expired"}[claim.State == storage.StateReleased] +
				": " + again + "."
			res.EventsURL = keyEventsURL(src.Name, d.Key)
		}
		if refused {
			return *res, probe, nil
		}
		// A payload the receiver cannot describe has no flags to foresee: the lab shows
		// the derivation's error itself.
		if s.probe != nil {
			if p, err := s.probe(src.Name, h, event); err == nil {
				if err := s.foresee(ctx, res, claim, p); err != nil {
					return views.LabResult{}, probe, err
				}
				probe = p
			}
		}
	}
	return *res, probe, nil
}
