package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
)

// takes refuses a request whose query holds a parameter h does not read, naming it: a
// slip in a name (sorce=ota) would otherwise be dropped without a word, and a list
// answer every delivery, key or suspect instead of those asked for, as a body's unknown
// field is refused (readBody).
func takes(h handlerFunc, names ...string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		for _, name := range slices.Sorted(maps.Keys(q)) {
			if slices.Contains(names, name) {
				continue
			}
			if len(names) == 0 {
				return Errorf(http.StatusBadRequest, "%s: no such parameter (this endpoint takes none)", name)
			}
			return Errorf(http.StatusBadRequest, "%s: no such parameter (this endpoint takes %s)", name, strings.Join(names, ", "))
		}
		return h(w, r)
	}
}

// registerAPI adds the JSON API under /api/v1/. It authenticates by bearer token only
// (hookdedup token add USER), never by the console's cookie, so cross-site requests
// carry no credentials and need no CSRF token.
func (s *Server) registerAPI(mux *http.ServeMux) {
	api := &api{s}
	mux.Handle("GET /api/v1/deliveries", api.auth(storage.RoleViewer, takes(api.listDeliveries, "source", "outcome", "mismatch", "property", "property_none",
		"booking", "status", "key", "currency", "currency_none", "amount", "flag", "flag_state", "from", "to", "batch", "before", "limit")))
	mux.Handle("GET /api/v1/deliveries/{id}", api.auth(storage.RoleViewer, takes(api.getDelivery)))
	mux.Handle("GET /api/v1/keys", api.auth(storage.RoleViewer, takes(api.listKeys, "source", "state", "stuck", "before", "after", "limit")))
	mux.Handle("GET /api/v1/key", api.auth(storage.RoleViewer, takes(api.getKey, "source", "key")))
	mux.Handle("POST /api/v1/release", api.auth(storage.RoleOperator, takes(api.release)))
	mux.Handle("GET /api/v1/alerts", api.auth(storage.RoleViewer, takes(api.listAlerts, "state", "before", "limit")))
	mux.Handle("POST /api/v1/alerts/{id}/acknowledge", api.auth(storage.RoleOperator, takes(api.alertAction("acknowledge"))))
	mux.Handle("POST /api/v1/alerts/{id}/resolve", api.auth(storage.RoleOperator, takes(api.alertAction("resolve"))))
	mux.Handle("POST /api/v1/bulk", api.auth(storage.RoleOperator, takes(api.createBulk)))
	mux.Handle("GET /api/v1/bulk", api.auth(storage.RoleViewer, takes(api.listBulk(""), "state", "before")))
	mux.Handle("GET /api/v1/bulk/pending", api.auth(storage.RoleViewer, takes(api.listBulk(storage.BulkPendingApproval), "before")))
	mux.Handle("GET /api/v1/bulk/{id}", api.auth(storage.RoleViewer, takes(api.getBulk)))
	mux.Handle("POST /api/v1/bulk/{id}/start", api.auth(storage.RoleOperator, takes(api.bulkStepAPI("start"))))
	mux.Handle("POST /api/v1/bulk/{id}/cancel", api.auth(storage.RoleOperator, takes(api.bulkStepAPI("cancel"))))
	mux.Handle("POST /api/v1/bulk/{id}/approve", api.auth(storage.RoleOperator, takes(api.bulkStepAPI("approve"))))
	mux.Handle("POST /api/v1/bulk/{id}/refuse", api.auth(storage.RoleOperator, takes(api.bulkStepAPI("refuse"))))
	mux.Handle("GET /api/v1/suspects", api.auth(storage.RoleViewer, takes(api.listSuspects, "delivery", "kind", "state", "source", "from", "to", "before", "limit")))
	mux.Handle("POST /api/v1/suspects/{id}/review", api.auth(storage.RoleOperator, takes(api.reviewSuspect)))
	mux.Handle("GET /api/v1/ledger", api.auth(storage.RoleViewer, takes(api.ledger, "source", "property", "currency", "from", "to", "limit")))
	mux.Handle("/api/v1/", api.auth(storage.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
		if allow := otherMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return Errorf(http.StatusMethodNotAllowed, "%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return Errorf(http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	}))
}

// otherMethods returns the methods besides r's that an endpoint of mux at r's path
// takes, none when the path is no endpoint: the catch-all under /api/v1/ matches
// every method, so the mux's own 405 never comes, and a script that used the wrong
// method would be told there is no such endpoint and look for a mistake in its path.
func otherMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/api/v1/" {
			allow = append(allow, m)
		}
	}
	return allow
}

type api struct{ *Server }

// knownSource refuses, with 400, a source that names nothing the console knows
// (unknownSource), as the console's lists do: a list of a misspelt source would be
// empty, and a release of every stuck key of it would read as a source with nothing
// stuck. A source the configuration no longer has, with anything of it still stored,
// is known.
func (a *api) knownSource(ctx context.Context, name string) error {
	problem, err := a.unknownSource(ctx, name)
	if err == nil && problem != "" {
		err = Errorf(http.StatusBadRequest, "%s", problem)
	}
	return err
}

func writeAPI(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// apiCSP: an API answer is data, never a page: it loads nothing and no page frames it.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// auth checks the bearer token and the role, then runs h; apiError answers an error
// of either. Every answer, a refusal too, carries the security headers, and no-store:
// it holds deliveries' bodies and headers, or says which token was refused, and no cache
// on the way, nor the browser, is to keep it.
func (a *api) auth(role string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header(), r, apiCSP, "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		u, err := a.authorize(r, role)
		if err == nil {
			err = singleValued(h)(w, r.WithContext(WithUser(r.Context(), u)))
		}
		if err != nil {
			a.apiError(w, r, err)
		}
	})
}

// authorize returns the user of the request's bearer token if its role is at least
// role, or says why not.
func (a *api) authorize(r *http.Request, role string) (User, error) {
	// The scheme is case-insensitive (RFC 9110, 11.1): "bearer" is no missing token.
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return User{}, Errorf(http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>; create one with: hookdedup token add USER)")
	}
	u, err := a.tokens.TokenUser(r.Context(), strings.TrimSpace(token))
	if errors.Is(err, storage.ErrNotFound) {
		return User{}, Errorf(http.StatusUnauthorized, "invalid or revoked token")
	}
	if err != nil {
		return User{}, err
	}
	if !Allowed(u.Role, role) {
		return User{}, Errorf(http.StatusForbidden, "role %s may not do this (needs %s)", u.Role, role)
	}
	return User{Name: u.Name, Role: u.Role}, nil
}

// apiDelivery is a delivery as the API shows it.
type apiDelivery struct {
	ID            string          `json:"id"`
	Source        string          `json:"source"`
	ReceivedAt    time.Time       `json:"received_at"`
	Outcome       string          `json:"outcome"`
	Status        int             `json:"status"`
	Error         string          `json:"error,omitempty"`
	Key           string          `json:"key,omitempty"`
	Mismatch      bool            `json:"mismatch"`
	MoneyMismatch bool            `json:"money_mismatch"`
	FirstDelivery string          `json:"first_delivery,omitempty"`
	PayloadHash   string          `json:"payload_hash,omitempty"`
	Property      string          `json:"property,omitempty"`
	Booking       string          `json:"booking,omitempty"`
	EventStatus   string          `json:"event_status,omitempty"`
	Amount        string          `json:"amount,omitempty"`
	Currency      string          `json:"currency,omitempty"`
	ContentType   string          `json:"content_type,omitempty"`
	Headers       http.Header     `json:"headers,omitempty"`
	Body          json.RawMessage `json:"body,omitempty"`      // the payload when it is JSON in UTF-8
	BodyText      string          `json:"body_text,omitempty"` // otherwise, as text made valid UTF-8
	// Batch is the first item's delivery of the batched request this delivery is an
	// item of, and BatchIndex its place there from 0; both absent for a request of
	// its own.
	Batch      string `json:"batch,omitempty"`
	BatchIndex *int   `json:"batch_index,omitempty"`
	// BatchEnvelope is what that request held besides its events, as the JSON it is,
	// with a delivery read whole (as its headers and body are); absent for a request of
	// its own, and for an item stored before envelopes were kept.
	BatchEnvelope json.RawMessage `json:"batch_envelope,omitempty"`
	// BatchEnvelopeText is the envelope as sent when it is not indentable, as BodyText.
	BatchEnvelopeText string `json:"batch_envelope_text,omitempty"`
	// Flags are the suspects that name this delivery, as the one flagged or as the
	// other one it may double.
	Flags []apiSuspect `json:"flags"`
}

func toAPIDelivery(d storage.Delivery, full bool) apiDelivery {
	out := apiDelivery{
		ID: strconv.FormatInt(d.ID, 10), Source: d.Source, ReceivedAt: d.ReceivedAt, Outcome: string(d.Outcome),
		Status: d.Status, Error: d.Error, Key: d.Key, Mismatch: d.Mismatch, MoneyMismatch: d.MoneyMismatch, PayloadHash: d.PayloadHash,
		Property: d.Property, Booking: d.Booking, EventStatus: d.EventStatus, Amount: d.Amount, Currency: d.Currency, ContentType: d.ContentType,
		Flags: []apiSuspect{},
	}
	if d.FirstDelivery != 0 && d.FirstDelivery != d.ID {
		out.FirstDelivery = strconv.FormatInt(d.FirstDelivery, 10)
	}
	if d.Batch != 0 {
		index := d.BatchIndex
		out.Batch, out.BatchIndex = strconv.FormatInt(d.Batch, 10), &index
	}
	if full {
		// Intake stores only valid JSON there; anything else is left out rather than
		// let it break the whole answer.
		switch env := []byte(d.BatchEnvelope); {
		case d.BatchEnvelope == "" || !json.Valid(env):
		case indentable(env):
			out.BatchEnvelope = env
		default:
			// The answer's indentation would blow it up, as it would such a body.
			out.BatchEnvelopeText = d.BatchEnvelope
		}
		out.Headers = d.Headers
		// json.Valid passes bytes that are not UTF-8 inside a string, and RawMessage
		// copies them through: the whole answer would then be no JSON text (RFC 8259
		// §8.1) for a strict client. Intake stores such a body, refused, once signed;
		// and one that is not indentable, which the answer's indentation would blow up.
		if json.Valid(d.Body) && utf8.Valid(d.Body) && indentable(d.Body) {
			out.Body = d.Body
		} else {
			out.BodyText = strings.ToValidUTF8(string(d.Body), "\uFFFD")
		}
	}
	return out
}

func (a *api) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := storage.DeliveryFilter{
		Source: q.Get("source"), Outcome: storage.Outcome(q.Get("outcome")),
		Property: storage.Label(q.Get("property")), Booking: storage.Label(q.Get("booking")),
		Status: storage.Label(q.Get("status")), Key: q.Get("key"),
		Currency: storage.CurrencyCode(q.Get("currency")), Flag: storage.SuspectKind(q.Get("flag")), FlagState: q.Get("flag_state"),
	}
	switch f.Outcome {
	case "", storage.Accepted, storage.Duplicate, storage.Rejected:
	default:
		return Errorf(http.StatusBadRequest, "outcome %q: want accepted, duplicate or rejected", f.Outcome)
	}
	var err error
	if f.Mismatch, f.MoneyMismatch, err = mismatchFilter(q); err != nil {
		return err
	}
	if f.NoProperty, err = noneFilter(q, "property", f.Property); err != nil {
		return err
	}
	if f.NoCurrency, err = noneFilter(q, "currency", f.Currency); err != nil {
		return err
	}
	if f.HasAmount, err = amountFilter(q); err != nil {
		return err
	}
	if f.Flag != "" && f.Flag != storage.FlagAny && !validKind(string(f.Flag)) {
		return Errorf(http.StatusBadRequest, "flag %q: want any, business_key, correlation or late_duplicate", f.Flag)
	}
	if f.FlagState != "" && !validSuspectState(f.FlagState) {
		return Errorf(http.StatusBadRequest, "flag_state %q: want open, confirmed or dismissed", f.FlagState)
	}
	if f.Key != "" && f.Source == "" {
		for _, src := range a.sources {
			f.KeySources = append(f.KeySources, src.Name)
		}
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
	if f.Batch, err = apiID(q, "batch"); err != nil {
		return err
	}
	if f.Before, err = apiID(q, "before"); err != nil {
		return err
	}
	limit, err := apiLimit(q, 50, 500)
	if err != nil {
		return err
	}
	f.Limit = limit
	if err := a.knownSource(r.Context(), f.Source); err != nil {
		return err
	}
	page, err := a.events.Deliveries(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Deliveries []apiDelivery `json:"deliveries"`
		Next       string        `json:"next,omitempty"` // pass as before= for the next page
	}{Deliveries: []apiDelivery{}}
	of, err := a.suspects.SuspectsOf(r.Context(), deliveryIDs(page.Deliveries))
	if err != nil {
		return err
	}
	for _, d := range page.Deliveries {
		ad := toAPIDelivery(d, false)
		ad.Flags = toAPISuspects(of[d.ID])
		out.Deliveries = append(out.Deliveries, ad)
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(page.Next, 10)
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

func apiTime(q map[string][]string, name string) (time.Time, error) {
	v := ""
	if vs := q[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, Errorf(http.StatusBadRequest, "%s=%q: want an RFC 3339 time such as 2026-11-30T08:00:00Z", name, v)
	}
	return t, nil
}

// apiLimit reads a list's limit parameter: def when absent, else a number from 1 to
// most. One out of range is refused rather than read as the nearest bound: limit=0 would
// answer one row, and limit=10000 the most, as if that were every row asked for.
func apiLimit(q map[string][]string, def, most int) (int, error) {
	n, err := apiInt(q, "limit", int64(def))
	if err != nil || n < 1 || n > int64(most) {
		return 0, Errorf(http.StatusBadRequest, "limit=%q: want a number of rows from 1 to %d", q["limit"][0], most)
	}
	return int(n), nil
}

// apiID reads a parameter that names a row by its id (a delivery, a batch, the before
// of a list's next page): 0 when absent. Ids start at 1, so 0 is refused rather than
// read as no filter, which would list every delivery or suspect instead of none, or as
// no cursor, which would answer the first page again to a client paging on.
func apiID(q map[string][]string, name string) (int64, error) {
	n, err := apiInt(q, name, 0)
	if vs := q[name]; err != nil || n == 0 && len(vs) > 0 && vs[0] != "" {
		return 0, Errorf(http.StatusBadRequest, "%s=%q: want an id, a whole number from 1", name, vs[0])
	}
	return n, nil
}

func apiInt(q map[string][]string, name string, def int64) (int64, error) {
	v := ""
	if vs := q[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, Errorf(http.StatusBadRequest, "%s=%q: want a non-negative whole number", name, v)
	}
	return n, nil
}

type apiDerivation struct {
	Method    string     `json:"method"`
	From      string     `json:"from,omitempty"`
	Fields    []apiField `json:"fields,omitempty"`
	Canonical string     `json:"canonical,omitempty"`
	SHA256    string     `json:"sha256,omitempty"`
}

// apiField is one key field of a derivation. Its member names are capitalised, unlike
// the rest of the API, because clients already read them so.
type apiField struct {
	Pointer string `json:"Pointer"`
	Value   string `json:"Value"` // canonical JSON; "null" when absent
}

func toAPIDerivation(kd storage.Derivation) *apiDerivation {
	out := &apiDerivation{Method: kd.Method, From: kd.EventIDFrom, Canonical: kd.Canonical, SHA256: kd.Hash}
	for _, f := range kd.Fields {
		out.Fields = append(out.Fields, apiField{Pointer: f.Pointer, Value: f.Value})
	}
	return out
}

type apiAttempt struct {
	// Delivery is the delivery whose payload the attempt sent: a key claimed again
	// lists the attempts of its earlier claims too.
	Delivery   string    `json:"delivery"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
	Response   string    `json:"response,omitempty"`
	// Interrupted: its lease ran out (at At) before its outcome was recorded; the
	// downstream may have received it.
	Interrupted bool `json:"interrupted,omitempty"`
}

type apiClaim struct {
	Source        string    `json:"source"`
	Key           string    `json:"key"`
	State         string    `json:"state"`
	Stuck         bool      `json:"stuck"`
	Held          bool      `json:"held"` // a delivery now would be a duplicate
	FirstDelivery string    `json:"first_delivery"`
	Since         time.Time `json:"since"`
	ExpiresAt     time.Time `json:"expires_at"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty"`
}

func (a *api) toAPIClaim(c storage.Claim) apiClaim {
	now := a.now()
	return apiClaim{Source: c.Source, Key: c.Key, State: c.State, Stuck: c.Stuck(now.Add(-a.stuck)), Held: c.Held(now),
		FirstDelivery: strconv.FormatInt(c.FirstDelivery, 10), Since: c.UpdatedAt, ExpiresAt: c.ExpiresAt,
		Attempts: c.Attempts, LastError: c.LastError}
}

// noSuchID is the API's answer for an id that names no what ("bulk action"): a 404
// naming it.
func noSuchID(what string, id int64) error {
	return Errorf(http.StatusNotFound, "no such %s: %d", what, id)
}

// apiPathID reads the id in r's path, of a what ("delivery"): a whole number from 1, as
// the lists' before= and delivery= are, or a 400 that says so. 0 or a negative number is
// no id, not an id of nothing stored.
func apiPathID(r *http.Request, what string) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, Errorf(http.StatusBadRequest, "%s id %q: want an id, a whole number from 1", what, v)
	}
	return id, nil
}

func (a *api) getDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := apiPathID(r, "delivery")
	if err != nil {
		return err
	}
	d, err := a.events.Delivery(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return noSuchID("delivery", id)
	}
	if err != nil {
		return err
	}
	out := struct {
		Delivery   apiDelivery    `json:"delivery"`
		Derivation *apiDerivation `json:"derivation,omitempty"`
		Claim      *apiClaim      `json:"claim,omitempty"`
		// The first KeyDeliveriesShown deliveries of the key, oldest first; with
		// same_key_more, /api/v1/deliveries?source=S&key=K pages through all of them.
		SameKey     []apiDelivery `json:"same_key,omitempty"`
		SameKeyMore bool          `json:"same_key_more,omitempty"`
		Attempts    []apiAttempt  `json:"attempts,omitempty"`
	}{Delivery: toAPIDelivery(d, true)}
	flagged, err := a.suspects.Suspects(r.Context(), storage.SuspectFilter{Delivery: d.ID, Limit: maxFlagsShown})
	if err != nil {
		return err
	}
	out.Delivery.Flags = toAPISuspects(flagged.Suspects)
	if d.KeyMethod != "" {
		out.Derivation = toAPIDerivation(d.Derivation())
	}
	if d.Key != "" {
		k, err := a.keyDetail(r.Context(), d.Source, d.Key)
		if err != nil {
			return err
		}
		out.Claim, out.SameKey, out.SameKeyMore, out.Attempts = k.Claim, k.Deliveries, k.More, k.Attempts
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

// apiKey is what the API tells of one key: its claim (nil once swept), its first
// KeyDeliveriesShown deliveries, oldest first (More when it has others), its attempts.
type apiKey struct {
	Claim      *apiClaim     `json:"claim"`
	Deliveries []apiDelivery `json:"deliveries"`
	More       bool          `json:"more_deliveries,omitempty"`
	Attempts   []apiAttempt  `json:"attempts"`
}

func (a *api) keyDetail(ctx context.Context, source, key string) (apiKey, error) {
	var k apiKey
	c, err := a.events.Claim(ctx, source, key)
	switch {
	case err == nil:
		ac := a.toAPIClaim(c)
		k.Claim = &ac
	case !errors.Is(err, storage.ErrNotFound):
		return apiKey{}, err
	}
	all, more, err := a.events.FirstKeyDeliveries(ctx, source, key, KeyDeliveriesShown)
	if err != nil {
		return apiKey{}, err
	}
	k.More = more
	k.Deliveries = make([]apiDelivery, 0, len(all))
	for _, d := range all {
		k.Deliveries = append(k.Deliveries, toAPIDelivery(d, false))
	}
	atts, err := a.events.Attempts(ctx, source, key)
	if err != nil {
		return apiKey{}, err
	}
	k.Attempts = make([]apiAttempt, 0, len(atts))
	for _, at := range atts {
		k.Attempts = append(k.Attempts, apiAttempt{Delivery: strconv.FormatInt(at.Delivery, 10), At: at.StartedAt, DurationMS: at.Duration.Milliseconds(), Status: at.Status, Error: at.Error, Response: at.Response,
			Interrupted: at.Error == storage.AttemptInterrupted})
	}
	return k, nil
}

func (a *api) getKey(w http.ResponseWriter, r *http.Request) error {
	source, key := r.URL.Query().Get("source"), r.URL.Query().Get("key")
	if source == "" || key == "" {
		return Errorf(http.StatusBadRequest, "source and key are required: /api/v1/key?source=S&key=K")
	}
	k, err := a.keyDetail(r.Context(), source, key)
	if err != nil {
		return err
	}
	if k.Claim == nil && len(k.Deliveries) == 0 {
		return Errorf(http.StatusNotFound, "no such key: %s/%s", source, key)
	}
	writeAPI(w, http.StatusOK, k)
	return nil
}

func (a *api) listKeys(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var stuck bool
	switch v := q.Get("stuck"); v {
	case "", "false":
	case "true":
		stuck = true
	default:
		return Errorf(http.StatusBadRequest, "stuck: %q is not true or false", v)
	}
	f := storage.KeyFilter{Source: q.Get("source"), State: q.Get("state"), Stuck: stuck, StuckBefore: a.now().Add(-a.stuck)}
	before, err := apiID(q, "before")
	if err != nil {
		return err
	}
	// A stuck listing comes oldest first, so its cursor is a time and an id, not an id
	// to go below: it has a parameter of its own.
	if v := q.Get("after"); v != "" {
		if f.After, err = storage.ParseKeyCursor(v); err != nil {
			return Errorf(http.StatusBadRequest, "after=%q: not a cursor; pass on the next of a stuck listing's page as it is", v)
		}
		f.StuckBefore = f.After.StuckBefore
	}
	limit, err := apiLimit(q, 100, 1000)
	if err != nil {
		return err
	}
	f.Before, f.Limit = before, limit
	if err := f.Check(); err != nil {
		return Errorf(http.StatusBadRequest, "%s", err)
	}
	if err := a.knownSource(r.Context(), f.Source); err != nil {
		return err
	}
	page, err := a.keys.Keys(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Keys []apiClaim `json:"keys"`
		Next string     `json:"next,omitempty"`
	}{Keys: []apiClaim{}}
	for _, c := range page.Keys {
		out.Keys = append(out.Keys, a.toAPIClaim(c))
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(page.Next, 10)
	}
	if !page.After.IsZero() {
		out.Next = page.After.String()
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

// releaseRequest is the body of POST /api/v1/release: one key (source and key), or every
// key of a source in a state or stuck.
type releaseRequest struct {
	Source    string `json:"source"`
	Key       string `json:"key"`
	State     string `json:"state"`
	Stuck     bool   `json:"stuck"`
	Reason    string `json:"reason"`
	Reprocess bool   `json:"reprocess"`
}

type releaseResult struct {
	Source   string `json:"source"`
	Key      string `json:"key"`
	Previous string `json:"previous,omitempty"`
	Changed  bool   `json:"changed"`
	State    string `json:"state,omitempty"` // the key's state now
	Error    string `json:"error,omitempty"`
}

// decodeBody reads a request's JSON body, at most 64 KiB, into v, refusing fields v
// does not have and anything after the one JSON value; want shows the shape expected
// in the error.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, want string) error {
	return readBody(w, r, v, want, false)
}

// decodeOptionalBody is decodeBody for a body that may be left out: an empty one leaves
// v as it is.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any, want string) error {
	return readBody(w, r, v, want, true)
}

func readBody(w http.ResponseWriter, r *http.Request, v any, want string, optional bool) error {
	var raw bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(http.MaxBytesReader(w, r.Body, 64<<10), &raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if optional && errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return Errorf(http.StatusBadRequest, "body: %s (want %s)", bodyProblem(err), want)
	}
	// A second value would be dropped without a word: two objects run together (a
	// script appending where it meant to replace) would release the first key and not
	// reprocess the second, and the caller would never hear of it.
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
	case err == nil, errors.As(err, new(*json.SyntaxError)):
		return Errorf(http.StatusBadRequest, "body: more data after the JSON value (want %s)", want)
	default:
		return Errorf(http.StatusBadRequest, "body: %s (want %s)", bodyProblem(err), want)
	}
	// So would a field given twice, as a query parameter given twice would: the decoder
	// keeps the last value, and {"key":"a",…,"key":"b"} would act on b alone.
	if name, n := repeatedField(raw.Bytes()); n > 1 {
		return Errorf(http.StatusBadRequest, "body: field %s given %d times; it takes one value (want %s)", name, n, want)
	}
	return nil
}

// repeatedField returns the first field that an object of the JSON value data names more
// than once, dotted from the top as decoding errors name fields (filter.source), and how
// many times; names are compared without case, as encoding/json matches them to a
// struct's fields. data is a value the decoder read whole, so it is well formed.
func repeatedField(data []byte) (string, int) {
	name, n, _ := repeatedIn(json.NewDecoder(bytes.NewReader(data)), "")
	return name, n
}

func repeatedIn(dec *json.Decoder, path string) (string, int, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", 0, err
	}
	var inner string
	var innerN int
	switch tok {
	case json.Delim('{'):
		var order []string
		count, given := map[string]int{}, map[string]string{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return "", 0, err
			}
			field, _ := k.(string)
			if path != "" {
				field = path + "." + field
			}
			fold := strings.ToLower(strings.ToUpper(field))
			if count[fold] == 0 {
				order, given[fold] = append(order, fold), field
			}
			count[fold]++
			name, n, err := repeatedIn(dec, field)
			if err != nil {
				return "", 0, err
			}
			if innerN == 0 && n > 1 {
				inner, innerN = name, n
			}
		}
		for _, fold := range order {
			if count[fold] > 1 {
				return given[fold], count[fold], nil
			}
		}
	case json.Delim('['):
		for dec.More() {
			name, n, err := repeatedIn(dec, path)
			if err != nil {
				return "", 0, err
			}
			if innerN == 0 && n > 1 {
				inner, innerN = name, n
			}
		}
	default:
		return "", 0, nil
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return "", 0, err
	}
	return inner, innerN, nil
}

// bodyProblem words a JSON decoding error for the API's caller: the field and the type
// it takes, in JSON's terms rather than Go's (whose struct names are no business of the
// caller's).
func bodyProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var tm *time.ParseError
	switch {
	case errors.As(err, &typ):
		want := typ.Type.Kind().String()
		switch typ.Type.Kind() {
		case reflect.Bool:
			want = "true or false"
		case reflect.String:
			want = "a string"
		case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
			want = "a number"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Slice:
			want = "an array"
		}
		if typ.Field == "" {
			return fmt.Sprintf("a JSON %s where %s belongs", typ.Value, want)
		}
		return fmt.Sprintf("field %s: a JSON %s where %s belongs", typ.Field, typ.Value, want)
	case errors.As(err, &tm):
		return fmt.Sprintf("time %q is not RFC 3339 (2026-11-30T00:00:00Z)", tm.Value)
	}
	return err.Error()
}

func (a *api) release(w http.ResponseWriter, r *http.Request) error {
	var req releaseRequest
	if err := decodeBody(w, r, &req, `{"source":…,"key":…,"reason":…,"reprocess":false}`); err != nil {
		return err
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if req.Source == "" {
		return Errorf(http.StatusBadRequest, "source is required")
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	switch {
	case req.Key == "" && req.State == "" && !req.Stuck:
		return Errorf(http.StatusBadRequest, "name a key, or a state or stuck=true for every matching key")
	case req.Key != "" && (req.State != "" || req.Stuck):
		return Errorf(http.StatusBadRequest, "name a key or a set (state, stuck), not both")
	}
	if req.Reprocess {
		if err := a.checkReprocessSource(req.Source); err != nil {
			return Errorf(http.StatusBadRequest, "%s", err)
		}
	}
	u, _ := UserFrom(r.Context())
	rel := storage.Release{Source: req.Source, Key: req.Key, Actor: u.Name, Reason: req.Reason, Reprocess: req.Reprocess,
		StuckBefore: a.now().Add(-a.stuck), Thresholds: a.thresholds}
	to := storage.StateReleased
	if req.Reprocess {
		to = storage.StateProcessing
	}
	if req.Key != "" {
		res, err := a.keys.ReleaseKey(r.Context(), rel)
		if over, ok := errors.AsType[*storage.NeedsApprovalError](err); ok {
			return apiNeedsApproval(over)
		}
		if why, ok := storage.RefusalOf(err); ok {
			code := http.StatusConflict
			if why == storage.RefusedNotFound {
				code = http.StatusNotFound
			}
			return Errorf(code, "%s/%s: %s", req.Source, req.Key, why.Message())
		}
		if err != nil {
			return err
		}
		out := releaseResult{Source: req.Source, Key: req.Key, Previous: res.Previous, Changed: res.Changed}
		if res.Changed {
			out.State = to
			if req.Reprocess {
				a.wake()
			}
		}
		writeAPI(w, http.StatusOK, out)
		return nil
	}
	f := storage.KeyFilter{Source: req.Source, State: req.State, Stuck: req.Stuck, StuckBefore: rel.StuckBefore}
	if err := f.Check(); err != nil {
		return Errorf(http.StatusBadRequest, "%s", err)
	}
	if err := a.knownSource(r.Context(), req.Source); err != nil {
		return err
	}
	outcomes, err := a.keys.ReleaseKeys(r.Context(), f, rel)
	if over, ok := errors.AsType[*storage.NeedsApprovalError](err); ok {
		return apiNeedsApproval(over)
	}
	if err != nil {
		return err
	}
	sum := storage.Summarize(outcomes)
	out := struct {
		Matched int `json:"matched"`
		Changed int `json:"changed"`
		// More: the call stopped at the most keys one call takes; more may match.
		More    bool            `json:"more"`
		Results []releaseResult `json:"results"`
	}{Matched: sum.Matched, Changed: sum.Changed, More: storage.ReachedLimit(sum.Matched), Results: []releaseResult{}}
	for _, o := range outcomes {
		rr := releaseResult{Source: o.Source, Key: o.Key, Previous: o.Previous, Changed: o.Changed}
		if o.Refused != "" {
			rr.Error = o.Refused.Message()
		}
		if o.Changed {
			rr.State = to
		}
		out.Results = append(out.Results, rr)
	}
	if req.Reprocess && out.Changed > 0 {
		a.wake()
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

// apiNeedsApproval refuses a reprocess above the approval threshold.
func apiNeedsApproval(e *storage.NeedsApprovalError) error {
	return Errorf(http.StatusForbidden, "not reprocessed: %s (the approval threshold); make it a bulk action (POST /api/v1/bulk), which a second operator approves",
		strings.Join(e.Over, ", "))
}
