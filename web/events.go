package web

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// deliveryStore is what the events list, its CSV export, a delivery's page and the API's
// deliveries ask of storage.
type deliveryStore interface {
	Deliveries(ctx context.Context, f storage.DeliveryFilter) (storage.DeliveryPage, error)
	EachDelivery(ctx context.Context, f storage.DeliveryFilter, fn func(storage.Delivery) error) error
	// RejectionsNotStored counts the rejections f matches that have no delivery row.
	RejectionsNotStored(ctx context.Context, f storage.DeliveryFilter) (int64, error)
	// Delivery returns ErrNotFound if there is no delivery with that id.
	Delivery(ctx context.Context, id int64) (storage.Delivery, error)
	// FirstKeyDeliveries returns the first limit deliveries of a key, oldest first, and
	// whether it has more.
	FirstKeyDeliveries(ctx context.Context, source, key string, limit int) ([]storage.Delivery, bool, error)
	// Claim returns ErrNotFound if the key was never claimed or its row was swept.
	Claim(ctx context.Context, source, key string) (storage.Claim, error)
	Attempts(ctx context.Context, source, key string) ([]storage.Attempt, error)
	// BatchDeliveries returns the items of a batched request in order; ErrNotFound if
	// none is stored.
	BatchDeliveries(ctx context.Context, batch int64) ([]storage.Delivery, error)
	// BatchEnvelopes returns the batch envelope of each of the deliveries ids that has
	// one, by delivery id, its text only when it is max bytes or fewer.
	BatchEnvelopes(ctx context.Context, ids []int64, max int) (map[int64]storage.EnvelopeText, error)
}

const dateTimeLocal = "2006-01-02T15:04"

// KeyDeliveriesShown is how many deliveries of a key, oldest first, a delivery's page and
// the API's key details list; the events list, filtered by the key, pages through all.
const KeyDeliveriesShown = 100

// eventFilter reads the events filter from a query string. A problem is said in words
// for the user ("" when there is none).
func (s *Server) eventFilter(q url.Values) (views.DeliveryFilter, storage.DeliveryFilter, string) {
	vf := views.DeliveryFilter{
		Source:    typed(q.Get("source")),
		Outcome:   q.Get("outcome"),
		Currency:  storage.CurrencyCode(q.Get("currency")),
		Flag:      typed(q.Get("flag")),
		FlagState: typed(q.Get("flag_state")),
		Property:  storage.Label(q.Get("property")),
		Booking:   storage.Label(q.Get("booking")),
		Status:    storage.Label(q.Get("status")),
		Key:       typed(q.Get("key")),
		Batch:     typed(q.Get("batch")),
	}
	f := storage.DeliveryFilter{
		Source: vf.Source, Mismatch: vf.Mismatch, Property: vf.Property, Booking: vf.Booking,
		Status: vf.Status, Key: vf.Key, KeySources: s.sourceNames(),
		MoneyMismatch: vf.MoneyMismatch, Currency: vf.Currency,
		Flag: storage.SuspectKind(vf.Flag), FlagState: vf.FlagState,
	}
	var err error
	if vf.Mismatch, vf.MoneyMismatch, err = mismatchFilter(q); err != nil {
		return vf, f, err.Error()
	}
	f.Mismatch, f.MoneyMismatch = vf.Mismatch, vf.MoneyMismatch
	if f.NoProperty, err = noneFilter(q, "property", vf.Property); err != nil {
		return vf, f, err.Error()
	}
	if f.NoCurrency, err = noneFilter(q, "currency", vf.Currency); err != nil {
		return vf, f, err.Error()
	}
	vf.NoProperty, vf.NoCurrency = f.NoProperty, f.NoCurrency
	if f.HasAmount, err = amountFilter(q); err != nil {
		return vf, f, err.Error()
	}
	if f.HasAmount {
		vf.Amount = amountAny
	}
	if vf.Flag != "" && vf.Flag != string(storage.FlagAny) && !validKind(vf.Flag) {
		return vf, f, "Flag must be any, business_key, correlation or late_duplicate."
	}
	if vf.FlagState != "" && !validSuspectState(vf.FlagState) {
		return vf, f, "Review state must be open, confirmed or dismissed."
	}
	switch vf.Outcome {
	case "", "accepted", "duplicate", "rejected":
		f.Outcome = storage.Outcome(vf.Outcome)
	default:
		return vf, f, "Outcome must be accepted, duplicate or rejected."
	}
	// Both bounds are read before either is refused: the form shows both again as they
	// were, and one left out would be a filter without that end once corrected.
	var fromErr, toErr error
	f.From, vf.From, fromErr = s.timeBound(q, "from")
	f.To, vf.To, toErr = s.timeBound(q, "to")
	if fromErr != nil {
		return vf, f, "From must be a date and time like 2026-11-30T14:00."
	}
	if toErr != nil {
		return vf, f, "To must be a date and time like 2026-11-30T14:00."
	}
	if err := checkTimeRange(q.Get("from"), q.Get("to"), f.From, f.To); err != nil {
		return vf, f, err.Error()
	}
	if vf.Batch != "" {
		n, err := strconv.ParseInt(vf.Batch, 10, 64)
		if err != nil || n <= 0 {
			return vf, f, "Batch must be the number of a batch's first delivery, like 41."
		}
		f.Batch = n
	}
	if f.Before, err = pageBefore(q); err != nil {
		return vf, f, err.Error()
	}
	return vf, f, ""
}

// mismatchFilter reads the events filter's mismatch parameter: 1 or true selects the
// deliveries that differ from their key's first, money those that differ in amount,
// currency or status; absent, empty, 0 or false selects every delivery. Any other value
// is refused rather than read as one of these: a mistyped filter would list other
// deliveries than asked, with nothing to say so. A problem is returned as an *Error that
// names the parameter.
func mismatchFilter(q url.Values) (mismatch, money bool, err error) {
	switch v := q.Get("mismatch"); v {
	case "", "0", "false":
		return false, false, nil
	case "1", "true":
		return true, false, nil
	case "money":
		return false, true, nil
	default:
		return false, false, Errorf(http.StatusBadRequest, "mismatch=%q: want 1 or true (any mismatch), money (amount, currency or status) or 0", v)
	}
}

// noneFilter reads name_none, the events filter's parameter that selects the
// deliveries without a name (property, currency): the ledger's rows of none link to
// them. It is a parameter of its own, not a value of name: a property is free text from
// the payload, so any value could be a real one, and a form sends property= for a field
// left blank. 1 or true selects them; absent, empty, 0 or false does not; value is
// name's own value, which cannot stand beside it. A problem is returned as an *Error
// that names the parameter.
func noneFilter(q url.Values, name, value string) (bool, error) {
	param := name + "_none"
	switch v := q.Get(param); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		if value != "" {
			return false, Errorf(http.StatusBadRequest, "%s=%q and %s=%s: give one of them (%s selects the deliveries without a %s)",
				name, value, param, v, param, name)
		}
		return true, nil
	default:
		return false, Errorf(http.StatusBadRequest, "%s=%q: want 1 (only the deliveries without a %s) or 0", param, v, name)
	}
}

// amountAny is the value of the events filter's amount parameter that selects the
// deliveries carrying an amount, of any value, as flag=any selects those flagged by any
// kind; the ledger's money caught links to it.
const amountAny = "any"

// amountFilter reads the events filter's amount parameter: amount=any selects only the
// deliveries that carry an amount (a plain decimal or not: the ledger counts both); absent
// or empty selects every delivery. A problem is returned as an *Error that names the
// parameter.
func amountFilter(q url.Values) (bool, error) {
	switch v := typed(q.Get("amount")); v {
	case "":
		return false, nil
	case amountAny:
		return true, nil
	default:
		return false, Errorf(http.StatusBadRequest, "amount=%q: want any (only the deliveries that carry an amount)", v)
	}
}

func filterQuery(vf views.DeliveryFilter) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("source", vf.Source)
	set("outcome", vf.Outcome)
	if vf.Mismatch {
		q.Set("mismatch", "1")
	}
	if vf.MoneyMismatch {
		q.Set("mismatch", "money")
	}
	set("currency", vf.Currency)
	if vf.NoCurrency {
		q.Set("currency_none", "1")
	}
	set("amount", vf.Amount)
	set("flag", vf.Flag)
	set("flag_state", vf.FlagState)
	set("property", vf.Property)
	if vf.NoProperty {
		q.Set("property_none", "1")
	}
	set("booking", vf.Booking)
	set("status", vf.Status)
	set("key", vf.Key)
	set("from", vf.From.Param())
	set("to", vf.To.Param())
	set("batch", vf.Batch)
	return q
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	vf, f, problem := s.eventFilter(r.URL.Query())
	q := filterQuery(vf)
	v := views.Events{
		Page:     s.page(r, "Events", "events"),
		Filter:   vf,
		Filtered: len(q) > 0,
		Sources:  s.sourceNames(),
		CSVURL:   "/events.csv?" + q.Encode(),
	}
	if problem == "" {
		var err error
		if problem, err = s.unknownSource(r.Context(), vf.Source); err != nil {
			return err
		}
	}
	if problem != "" {
		v.Error = problem
		return s.render(w, r, http.StatusBadRequest, views.EventsView(v))
	}
	if u, _ := UserFrom(r.Context()); Allowed(u.Role, storage.RoleOperator) {
		v.BulkURL, v.BulkWhyNot = bulkFromEvents(vf)
	}
	page, err := s.events.Deliveries(r.Context(), f)
	if err != nil {
		return err
	}
	flags, err := s.flagsOf(r.Context(), page.Deliveries)
	if err != nil {
		return err
	}
	for _, d := range page.Deliveries {
		row := s.eventRow(d)
		row.Flags = flags[d.ID]
		v.Rows = append(v.Rows, row)
	}
	pages := newPager("/events", q)
	if page.Next != 0 {
		v.NextURL = pages.before(page.Next)
	}
	if f.Before != 0 {
		v.FirstURL = pages.newest()
	}
	v.Partial = page.Partial
	if f.Before == 0 {
		if v.NotStored, err = s.events.RejectionsNotStored(r.Context(), f); err != nil {
			return err
		}
	}
	return s.render(w, r, http.StatusOK, views.EventsView(v))
}

// csvCell keeps a spreadsheet from reading a value as a formula (a cell starting with
// = + - @ or a control character), unless it is a plain decimal such as -12.50, and shows
// control and bidi characters as escapes, as the console does: a key holding U+202E
// must not pass for another in a spreadsheet either. Only a plain decimal is left as
// it is: Go's float syntax also takes "-Inf", "+infinity", "-0x1p3" and "-1_0", which a
// spreadsheet reads as formulas.
func csvCell(v string) string {
	if v == "" {
		return v
	}
	v = views.Visible(v)
	if strings.ContainsRune("=+-@\t\r", rune(v[0])) && !storage.PlainAmount(v) {
		return "'" + v
	}
	return v
}

// csvEnvelope is an export's cell of a batch envelope: its text up to
// BatchEnvelopeHeaderMax bytes, the hand-off header's limit; past that its size, as the
// hand-off says it (the delivery's page and the API give it whole). A spreadsheet's cell holds
// 32,767 characters at most, and an envelope may be nearly max_body, once for each of
// a request's thousand items.
func csvEnvelope(e storage.EnvelopeText) string {
	if e.Size > storage.BatchEnvelopeHeaderMax {
		return fmt.Sprintf("omitted: %d bytes", e.Size)
	}
	return csvCell(e.Text)
}

func (s *Server) handleEventsCSV(w http.ResponseWriter, r *http.Request) error {
	_, f, problem := s.eventFilter(r.URL.Query())
	if problem == "" {
		var err error
		if problem, err = s.unknownSource(r.Context(), f.Source); err != nil {
			return err
		}
	}
	if problem != "" {
		return badRequest(problem)
	}
	f.Before = 0
	// A large export outlasts the server's write timeout, which suits pages: lift it.
	// A stop of the server does not wait for it (EndLongResponses).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30 * time.Minute))
	ctx, done := s.untilStop(w, r)
	defer done()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="hookdedup-events-%s.csv"`, s.now().In(s.loc).Format("20060102-150405")))
	cw := csv.NewWriter(w)
	cw.Write([]string{"id", "received_at", "source", "outcome", "mismatch", "http_status", "event_status",
		"property", "booking", "amount", "currency", "key", "key_method", "first_delivery", "payload_hash", "error",
		"batch", "batch_index", "money_mismatch", "flags", "flagged_with", "batch_envelope"})
	// Rows go out a stretch at a time, with the flags and the batch envelopes of the
	// stretch's deliveries read in one query each.
	var stretch []storage.Delivery
	write := func() error {
		ids := deliveryIDs(stretch)
		of, err := s.suspects.SuspectsOf(ctx, ids)
		if err != nil {
			return err
		}
		envelopes, err := s.events.BatchEnvelopes(ctx, ids, storage.BatchEnvelopeHeaderMax)
		if err != nil {
			return err
		}
		for _, d := range stretch {
			kinds, with := csvFlags(d.ID, of[d.ID])
			cw.Write([]string{
				strconv.FormatInt(d.ID, 10), d.ReceivedAt.UTC().Format(time.RFC3339Nano), csvCell(d.Source),
				string(d.Outcome), strconv.FormatBool(d.Mismatch), strconv.Itoa(d.Status), csvCell(d.EventStatus),
				csvCell(d.Property), csvCell(d.Booking), csvCell(d.Amount), csvCell(d.Currency), csvCell(d.Key), d.KeyMethod,
				strconv.FormatInt(d.FirstDelivery, 10), d.PayloadHash, csvCell(d.Error),
				strconv.FormatInt(d.Batch, 10), strconv.Itoa(d.BatchIndex),
				strconv.FormatBool(d.MoneyMismatch), kinds, with, csvEnvelope(envelopes[d.ID]),
			})
		}
		stretch = stretch[:0]
		cw.Flush()
		return cw.Error()
	}
	err := s.events.EachDelivery(ctx, f, func(d storage.Delivery) error {
		if stretch = append(stretch, d); len(stretch) == 500 {
			return write()
		}
		return nil
	})
	if err == nil && len(stretch) > 0 {
		err = write()
	}
	if err == nil {
		cw.Flush()
		err = cw.Error()
	}
	if err != nil {
		// Headers may be gone, and a 200 with them. The connection is cut rather than
		// the answer ended as if whole: the browser then reports the download as
		// failed instead of keeping part of the export as all of it.
		if errors.Is(context.Cause(ctx), errStopping) {
			s.log.Warn("csv export cut off: the server is stopping")
		} else {
			s.log.Error("csv export stopped", logErr, err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (s *Server) handleEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return errNotFound
	}
	// ?with=ID picks the delivery to compare with; anything else is no choice.
	with, _ := strconv.ParseInt(r.URL.Query().Get("with"), 10, 64)
	d, err := s.events.Delivery(r.Context(), id)
	if err != nil {
		return err
	}
	var k *keyData
	if d.Key != "" {
		if k, err = s.keyData(r.Context(), d, with); err != nil {
			return err
		}
	}
	var siblings []storage.Delivery
	if d.Batch != 0 {
		siblings, err = s.events.BatchDeliveries(r.Context(), d.Batch)
		if err != nil && !errors.Is(err, storage.ErrNotFound) { // swept: the item stands alone
			return err
		}
	}
	flagged, err := s.suspects.Suspects(r.Context(), storage.SuspectFilter{Delivery: d.ID, Limit: maxFlagsShown})
	if err != nil {
		return err
	}
	u, _ := UserFrom(r.Context())
	v := s.eventView(d, k, with, Allowed(u.Role, storage.RoleOperator))
	if blocked, err := s.blockedBy(r.Context(), d); err != nil {
		return err
	} else if blocked != 0 {
		// Nothing else on the page names the delivery it duplicates: not its key's.
		v.BlockedBy, v.BlockedURL = blocked, eventURL(blocked)
		if v.Key != nil {
			v.Key.Blocked = true
		}
	}
	if v.Batch = batchView(d, siblings); v.Batch != nil {
		v.Batch.Forwarded = v.ForwardURL != ""
	}
	v.Flags, v.CanReview = s.flagItems(d, flagged.Suspects), Allowed(u.Role, storage.RoleOperator)
	if err := s.unlinkSwept(r.Context(), v.Flags); err != nil {
		return err
	}
	v.Row.Flags = flagBadges(d.ID, flagged.Suspects)
	v.Page = s.page(r, fmt.Sprintf("Delivery %d", d.ID), "events")
	return s.render(w, r, http.StatusOK, views.EventView(v))
}

// blockedBy returns the delivery that d, a duplicate, was made a duplicate of by its
// business key (business_key_blocks): a first delivery of another key. 0 for any other
// delivery, and when that first delivery was swept by retention (nothing says then).
func (s *Server) blockedBy(ctx context.Context, d storage.Delivery) (int64, error) {
	if d.Outcome != storage.Duplicate || d.FirstDelivery == 0 || d.FirstDelivery == d.ID {
		return 0, nil
	}
	first, err := s.events.Delivery(ctx, d.FirstDelivery)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case first.Source == d.Source && first.Key == d.Key:
		return 0, nil
	}
	return first.ID, nil
}

// batchView places d among the items of its batched request, siblings (d among them);
// nil when d came alone or its siblings are no longer stored.
func batchView(d storage.Delivery, siblings []storage.Delivery) *views.Batch {
	if d.Batch == 0 || len(siblings) == 0 {
		return nil
	}
	// Retention deletes a request's items one by one (a duplicate before the event it
	// repeats): the request held at least as many as the highest place still stored.
	b := &views.Batch{ID: d.Batch, Index: d.BatchIndex, Count: len(siblings), Stored: len(siblings)}
	for _, o := range siblings {
		b.Count = max(b.Count, o.BatchIndex+1)
	}
	if d.ID != d.Batch {
		b.HeadersURL = eventURL(d.Batch)
	}
	if d.BatchEnvelope != "" {
		b.Envelope, _ = prettyBody([]byte(d.BatchEnvelope), false)
		b.EnvelopeSize = len(d.BatchEnvelope)
		b.EnvelopeHeaderSize = len(storage.BatchEnvelopeHeader(d.BatchEnvelope))
		b.EnvelopeHeaderMax = storage.BatchEnvelopeHeaderMax
		b.EnvelopeOmitted = b.EnvelopeHeaderSize > storage.BatchEnvelopeHeaderMax
		// Intake stores it with the first item only; once retention deletes that item,
		// the items it keeps have their own copy.
		b.EnvelopeShared = b.HeadersURL != "" && siblings[0].ID == d.Batch
	}
	for _, o := range siblings {
		b.Items = append(b.Items, views.BatchItem{
			Index: o.BatchIndex, URL: eventURL(o.ID), Outcome: string(o.Outcome), Mismatch: o.Mismatch,
			EventStatus: o.EventStatus, Key: o.Key, KeyShort: shortKey(o.Key),
			KeyURL: keyEventsURL(o.Source, o.Key), This: o.ID == d.ID,
		})
	}
	return b
}

// keyData is what a delivery's page shows of its key, as storage gives it.
type keyData struct {
	claim *storage.Claim // nil once the claim is swept
	// The first KeyDeliveriesShown deliveries of the key, oldest first, and whether it
	// has more.
	deliveries []storage.Delivery
	more       bool
	// past is the delivery ?with= asks for when it is one of the key's but past the
	// listed ones (nil otherwise).
	past     *storage.Delivery
	attempts []storage.Attempt
}

func (s *Server) keyData(ctx context.Context, d storage.Delivery, with int64) (*keyData, error) {
	k := &keyData{}
	claim, err := s.events.Claim(ctx, d.Source, d.Key)
	switch {
	case err == nil:
		k.claim = &claim
	case !errors.Is(err, storage.ErrNotFound):
		return nil, err
	}
	if k.deliveries, k.more, err = s.events.FirstKeyDeliveries(ctx, d.Source, d.Key, KeyDeliveriesShown); err != nil {
		return nil, err
	}
	listed := slices.ContainsFunc(k.deliveries, func(o storage.Delivery) bool { return o.ID == with })
	if k.more && with != 0 && with != d.ID && !listed {
		// A delivery of the key past the ones listed, from the events list.
		o, err := s.events.Delivery(ctx, with)
		switch {
		case err == nil && o.Source == d.Source && o.Key == d.Key:
			k.past = &o
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return nil, err
		}
	}
	if k.attempts, err = s.events.Attempts(ctx, d.Source, d.Key); err != nil {
		return nil, err
	}
	return k, nil
}

// eventView builds a delivery's page (all but its Page) from d and, when d has a key,
// k; with is the delivery asked to compare with (0: none), and canRelease whether the
// user may release keys.
func (s *Server) eventView(d storage.Delivery, k *keyData, with int64, canRelease bool) views.Event {
	src, known := s.source(d.Source)
	v := views.Event{
		Row:         s.eventRow(d),
		RemoteAddr:  d.RemoteAddr,
		ContentType: d.ContentType,
		BodySize:    len(d.Body),
		ForwardURL:  RedactURL(src.ForwardURL),
	}
	v.Body, v.BodyIsJSON = prettyBody(d.Body, false)
	if payload, ok := formPayload(d.ContentType, d.Body); ok {
		v.Body, v.BodyIsJSON = prettyBody(payload, false)
		v.BodyForm = strings.ToValidUTF8(string(d.Body), "\uFFFD")
	}
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, val := range d.Headers[k] {
			v.Headers = append(v.Headers, views.Header{Name: k, Value: val})
		}
	}
	if k == nil {
		return v
	}

	v.Derivation = viewDerivation(d.Derivation(), src, known)
	v.Key = s.keyState(d, k.claim, canRelease)

	all := k.deliveries
	if k.more {
		v.MoreDeliveriesURL = "/events?" + url.Values{"source": {d.Source}, "key": {d.Key}}.Encode()
		v.FirstShown = KeyDeliveriesShown
		if !slices.ContainsFunc(all, func(o storage.Delivery) bool { return o.ID == d.ID }) {
			all = append(slices.Clip(all), d) // past the first ones, so after them in id order
		}
	}
	other := compareWith(d, all, with, k.past)
	for _, o := range all {
		er := s.eventRow(o)
		er.This = o.ID == d.ID
		if !er.This && (other == nil || o.ID != other.ID) {
			er.CompareURL = eventURL(d.ID) + "?with=" + strconv.FormatInt(o.ID, 10) + "#compare"
		}
		v.Deliveries = append(v.Deliveries, er)
	}
	if other != nil {
		left, right := *other, d
		if left.ID > right.ID {
			left, right = right, left
		}
		v.Compare = compare(left, right, moneyMembers(src, known))
	}
	for _, a := range k.attempts {
		url := ""
		if a.Delivery != d.ID {
			url = eventURL(a.Delivery)
		}
		v.Attempts = append(v.Attempts, views.AttemptRow{
			Delivery: a.Delivery, DeliveryURL: url,
			Time: s.fullTime(a.StartedAt), Status: a.Status, OK: a.Status >= 200 && a.Status < 300 && a.Error == "",
			Duration: a.Duration.String(), Error: a.Error, Response: a.Response,
			Interrupted: a.Error == storage.AttemptInterrupted,
		})
	}
	return v
}

// keyState is the state of d's key as its page shows it; c is nil once the claim is
// swept.
func (s *Server) keyState(d storage.Delivery, c *storage.Claim, canRelease bool) *views.KeyState {
	ks := &views.KeyState{
		Source: d.Source, Key: d.Key, Value: d.Source + "/" + d.Key, Return: eventURL(d.ID),
	}
	if c == nil {
		ks.Missing = true
		return ks
	}
	now := s.now()
	ks.State = c.State
	ks.Stuck = c.Stuck(now.Add(-s.stuck))
	ks.Held = c.Held(now)
	ks.Since = s.fullTime(c.UpdatedAt) + " (" + s.ago(c.UpdatedAt) + ")"
	ks.Expires = s.fullTime(c.ExpiresAt)
	ks.Attempts = c.Attempts
	ks.LastError = c.LastError
	ks.CanRelease = canRelease && c.State != storage.StateReleased
	return ks
}

// compareWith picks the delivery that d's page compares d with, among listed (the
// deliveries of d's key on the page, d among them when it has others): the one ?with=
// asks for (its id with, listed or, as past, beyond the listed ones); else the first
// of the key when that is not d; else, d being the first, the first whose payload
// differs from d's, or failing that the second. Returns nil when d is its key's only
// delivery.
func compareWith(d storage.Delivery, listed []storage.Delivery, with int64, past *storage.Delivery) *storage.Delivery {
	if with != 0 && with != d.ID {
		for i := range listed {
			if listed[i].ID == with {
				return &listed[i]
			}
		}
		if past != nil && past.ID == with {
			return past
		}
	}
	if len(listed) < 2 {
		return nil
	}
	if listed[0].ID != d.ID {
		return &listed[0]
	}
	for i := range listed[1:] {
		if listed[i+1].PayloadHash != d.PayloadHash {
			return &listed[i+1]
		}
	}
	return &listed[1]
}

// viewDerivation is the one mapping of a key's derivation onto the screen: its steps,
// next to where src looks for an event id and which key fields it reads (known: src
// is still configured). Fields follow the order src lists its key fields, leaving out
// any it no longer reads (the canonical JSON still shows them); without that list they
// keep the derivation's own order.
func viewDerivation(d storage.Derivation, src Source, known bool) views.Derivation {
	v := views.Derivation{Method: d.Method, EventIDFrom: d.EventIDFrom, Canonical: d.Canonical, Hash: d.Hash, Key: d.Key,
		HashOK: d.Method != storage.MethodDerived || "derived:"+d.Hash == d.Key}
	if known {
		v.EventIDHow = src.EventID
		v.KeyFields = src.KeyFields
	}
	fields := d.Fields
	if len(v.KeyFields) > 0 {
		fields = nil
		for _, p := range v.KeyFields {
			if i := slices.IndexFunc(d.Fields, func(f storage.Field) bool { return f.Pointer == p }); i >= 0 {
				fields = append(fields, d.Fields[i])
			}
		}
	}
	for _, f := range fields {
		v.Fields = append(v.Fields, views.Field{Pointer: f.Pointer, Value: f.Value, Present: f.Present})
	}
	return v
}

// prettyBody indents a JSON body (or, with normalise, also sorts its members so that
// two deliveries compare by content, not by spelling). Anything else is returned as text,
// and so is JSON that is not indentable: the body as sent.
func prettyBody(body []byte, normalise bool) (string, bool) {
	if len(body) == 0 {
		return "", false
	}
	if !indentable(body) {
		return strings.ToValidUTF8(string(body), "\uFFFD"), false
	}
	if normalise {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false) // shown as text, escaped by templ: keep it as sent
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err == nil {
				return strings.TrimSuffix(out.String(), "\n"), true
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err == nil {
		return buf.String(), true
	}
	return strings.ToValidUTF8(string(body), "\uFFFD"), false
}

// indentable reports whether the JSON text body may be shown and given indented: nested
// no deeper than intake reads (storage.MaxJSONDepth), as only a body intake refused is,
// and with no more than maxIndentGrowth of indentation. Indented, each level's line
// carries the indentation of all those above it: a few kilobytes of brackets from a
// sender became hundreds of megabytes for whoever opened the rejection, and a megabyte
// of ones 60 levels deep, within intake's depth, sixty megabytes, in the console or
// through the API.
func indentable(body []byte) bool {
	deepest, growth := jsonShape(body)
	return deepest <= storage.MaxJSONDepth && growth <= maxIndentGrowth
}

// maxIndentGrowth bounds what indenting a body may add to a delivery's page. Each line
// of indented JSON carries two spaces for each level above it, so a payload can be made
// to grow sixtyfold within intake's nesting (a megabyte of ones in an array 60 levels
// deep made a page of 62 MB, three times over for a duplicate's comparison) for whoever
// opens it. A real payload grows by a fraction of its size.
const maxIndentGrowth = 4 << 20

// jsonShape scans the JSON text body once, outside its strings: how deeply its arrays
// and objects nest, and how many bytes, at most, indenting it two spaces a level adds
// (a line break and the indentation before each member, element and closing bracket,
// a space after each colon).
func jsonShape(body []byte) (deepest, growth int) {
	depth := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			i = storage.JSONStringEnd(body, i) - 1 // at the closing quote
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
			growth += 1 + 2*depth
		case ',':
			growth += 1 + 2*depth
		case ']', '}':
			depth = max(depth-1, 0)
			growth += 1 + 2*depth
		case ':':
			growth++
		}
	}
	return deepest, growth
}

// formPayload returns the JSON of a form body's payload field, as GitHub sends it with
// the form content type: the event the key was derived from. ok is false for any other
// body.
func formPayload(contentType string, body []byte) ([]byte, bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || len(form["payload"]) != 1 || !json.Valid([]byte(form["payload"][0])) {
		return nil, false
	}
	return []byte(form["payload"][0]), true
}

// eventBody is what two deliveries are compared by: the JSON, a form's payload.
func eventBody(d storage.Delivery) []byte {
	if payload, ok := formPayload(d.ContentType, d.Body); ok {
		return payload
	}
	return d.Body
}

// compare lays two deliveries side by side with a line diff of their normalised JSON;
// a changed line of one of the members money names (the amount, the currency, the
// status) is marked Money, unless the two carry the same money as a money mismatch
// compares it: one amount spelt two ways ("180.00" and 180.0) moved nothing more.
func compare(left, right storage.Delivery, money []string) *views.Compare {
	if left.MoneyTerms().Same(right.MoneyTerms()) {
		money = nil
	}
	lb, _ := prettyBody(eventBody(left), true)
	rb, _ := prettyBody(eventBody(right), true)
	c := &views.Compare{
		Left:  views.Side{ID: left.ID, URL: eventURL(left.ID), Label: label(left), Body: lb},
		Right: views.Side{ID: right.ID, URL: eventURL(right.ID), Label: label(right), Body: rb},
	}
	if lb == rb {
		c.Same = true
		return c
	}
	lines, ok := diffLines(strings.Split(lb, "\n"), strings.Split(rb, "\n"), 1500) // at most 1500² cells: 9 MB
	if !ok {
		c.TooBig = true
		return c
	}
	for i, l := range lines {
		lines[i].Money = l.Op != "=" && moneyLine(l.Text, money)
	}
	c.Lines = collapse(lines, 3)
	return c
}

func label(d storage.Delivery) string {
	l := "#" + strconv.FormatInt(d.ID, 10) + " " + string(d.Outcome)
	if d.Mismatch {
		l += ", mismatch"
	}
	return l
}

// maxFlagsShown bounds the flags a delivery's page lists: detection flags a delivery a
// few times at most, but the other side of a suspect has no bound.
const maxFlagsShown = 100

func deliveryIDs(ds []storage.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// csvFlags writes the suspects naming delivery id for the CSV export: their kinds and
// states ("business_key:open"), and the deliveries they link it with, each list
// separated by spaces.
func csvFlags(id int64, xs []storage.Suspect) (kinds, with string) {
	var k, w []string
	for _, x := range xs {
		k = append(k, string(x.Kind)+":"+x.State)
		other := x.Other
		if x.Delivery != id {
			other = x.Delivery
		}
		w = append(w, strconv.FormatInt(other, 10))
	}
	return strings.Join(k, " "), strings.Join(w, " ")
}

// moneyMembers are the JSON member names of src's amount, currency and status fields
// (the last step of each pointer), for marking them in a diff; nil when src is not
// configured any more.
func moneyMembers(src Source, known bool) []string {
	if !known {
		return nil
	}
	var out []string
	// An amount place may be qualified ("/amount_refunded when /type = …"): its member
	// is the pointer's.
	var amounts []string
	for _, place := range src.AmountField {
		amounts = append(amounts, storage.PlacePointer(place))
	}
	for _, p := range append(amounts, src.CurrencyField, src.StatusField) {
		if i := strings.LastIndex(p, "/"); i >= 0 && i < len(p)-1 {
			name := strings.ReplaceAll(strings.ReplaceAll(p[i+1:], "~1", "/"), "~0", "~")
			out = append(out, name)
		}
	}
	return out
}

// moneyLine reports whether a line of indented JSON is a member named one of names.
func moneyLine(line string, names []string) bool {
	line = strings.TrimSpace(line)
	for _, n := range names {
		b, _ := json.Marshal(n)
		if strings.HasPrefix(line, string(b)+":") {
			return true
		}
	}
	return false
}
