package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// Source is one configured webhook provider: POST /webhooks/{Name}.
type Source struct {
	Name     string
	Verifier signature.Verifier
	Keys     KeySpec
	// TTL is the dedup window; it should outlast the provider's redelivery window.
	TTL time.Duration
	// ForwardURL is where accepted events go; "" records only.
	ForwardURL     string
	MaxAttempts    int
	AttemptTimeout time.Duration
	MaxBackoff     time.Duration
	// Pointers to the business fields that label a delivery in the console: the
	// property, the booking, the event's status and the money a duplicate would have
	// moved. "" leaves a label empty.
	PropertyField, BookingField, StatusField string
	// AmountField names where the amount is: nowhere (empty), or one place or more, each
	// a pointer that may be qualified as an event_id place is ("/amount_refunded when
	// /type = charge.refunded"), the first that holds a value giving it.
	AmountField []string
	// CurrencyField points at the currency of AmountField's amount ("" for none).
	// AmountMinorUnits says the amount is a count of the currency's minor units (cents):
	// it is stored in major units, by the currency's ISO 4217 exponent, or by the
	// sender's own where CurrencyExponents names the currency (upper case).
	CurrencyField     string
	AmountMinorUnits  bool
	CurrencyExponents map[string]int
	// NoMoney names the events that moved no money, each a condition "POINTER =
	// VALUE|VALUE" (a refund that failed: "/data/object/status = failed|canceled"). Such
	// an event is stored with no amount and read by no correlation rule, so that no
	// total counts money that never moved; its payload keeps the amount it reported.
	NoMoney []string
	// Answer is the body of the 200 answer for an accepted or duplicate delivery.
	Answer Answer
	// FormEncoded accepts application/x-www-form-urlencoded deliveries whose JSON is
	// the payload field (GitHub's form content type): the signature is checked over the
	// form body as sent, which is what is stored and forwarded; the key and labels come
	// from the payload.
	FormEncoded bool
	// RedactHeaders names request headers that carry credentials for this source; they
	// are stored as "[redacted]".
	RedactHeaders []string
	// RedactFields are JSON pointers to credentials that some of the sender's bodies
	// carry (Mews' Integration Webhooks, its Connector API access token): masked in
	// the body kept of a refused delivery. An accepted one is the event's own, whole.
	RedactFields []string
	// Batch, when set, is a JSON pointer to the array of events in one request: each
	// element is an item, keyed, claimed, stored and handed downstream on its own.
	// Item is a pointer inside each element to the event ("" for the element itself).
	// Keys and the label fields are read inside the item.
	Batch, Item string
	// MaxBatchItems bounds the items of one request (0: DefaultMaxBatchItems); a
	// request with more is refused with 413.
	MaxBatchItems int
	// BusinessKey are JSON pointers to the fields that identify a business event
	// (property, booking, status, amount …) whatever its event id: an accepted delivery
	// whose business key another accepted delivery of the source carried within
	// BusinessWindow (0: DefaultBusinessWindow), under another key, is a suspected
	// duplicate; with BusinessKeyBlocks it is a duplicate instead (forensics.go).
	BusinessKey       []string
	BusinessWindow    time.Duration
	BusinessKeyBlocks bool
	// Correlations are the source's parts in correlation rules.
	Correlations []Correlation
}

// Answer is the body a sender expects with a 200.
type Answer string

const (
	// AnswerJSON is hookdedup's own JSON answer; the zero value means the same.
	AnswerJSON Answer = "json"
	// AnswerAccepted is the text "[accepted]" as text/plain, which Adyen's
	// notification webhooks expect.
	AnswerAccepted Answer = "[accepted]"
)

// Store is what the intake path needs of storage.
type Store interface {
	Record(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error
	// RecordBatch records the items of one request in one transaction, or none of them.
	RecordBatch(ctx context.Context, items []*storage.Delivery, claim storage.ClaimOptions) error
	Ping(ctx context.Context) error
}

// Config wires a Receiver.
type Config struct {
	Sources []Source
	Store   Store
	// MaxBody is the largest body accepted, in bytes; default 1 MiB.
	MaxBody int64
	Logger  *slog.Logger
	Metrics *Metrics
	// Now is the clock for signature timestamps, which come from the senders' clocks:
	// this machine's; default time.Now.
	Now func() time.Time
	// Clock is the time of what is stored (the minutes of the rejections counted, not
	// stored one by one), the store's; default Now. Replicas on PostgreSQL keep the
	// server's, and a count bucketed by a machine's clock minutes off would be added
	// to the wrong minute beside the rejections stored.
	Clock func() time.Time
	// OnAccepted, if set, is called after an accepted delivery whose source forwards
	// downstream has committed (a wake-up for the dispatcher; it must not block).
	OnAccepted func()
	// ForwardedElsewhere, if set, reports whether a source that this configuration has
	// without a forward_url is forwarded by another replica (Dispatcher's): its
	// deliveries are then queued for that replica instead of settled at once, as while
	// the replicas' configurations change one at a time.
	ForwardedElsewhere func(source string) bool
	// Rejections bounds the unauthenticated rejections stored individually (the rest
	// are counted); the zero value takes the defaults.
	Rejections RejectionLimits
}

// Receiver serves the intake endpoints.
type Receiver struct {
	sources map[string]*Source
	// redact: the token headers of every source (Source.RedactHeaders).
	redact  []string
	store   Store
	maxBody int64
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time
	clock   func() time.Time
	wake    func()
	// elsewhere is Config.ForwardedElsewhere, never nil.
	elsewhere func(source string) bool
	bufs      sync.Pool
	rejects   *rejections
	skew      skewWindow // of the last hour's signed deliveries
	// storeFails bounds the log lines of deliveries and batches not stored (storefail.go).
	storeFails storeFailures
	ready      readiness // ready.go
}

// New returns a Receiver for cfg.
func New(cfg Config) *Receiver {
	rc := &Receiver{
		sources:   make(map[string]*Source, len(cfg.Sources)),
		store:     cfg.Store,
		maxBody:   cfg.MaxBody,
		log:       cfg.Logger,
		metrics:   cfg.Metrics,
		now:       cfg.Now,
		clock:     cfg.Clock,
		wake:      cfg.OnAccepted,
		elsewhere: cfg.ForwardedElsewhere,
	}
	if rc.elsewhere == nil {
		rc.elsewhere = func(string) bool { return false }
	}
	// A sender that has the path wrong (a typo, another source's URL) still sends its
	// token: every source, and a path that names none, redacts the token headers of all.
	for _, src := range cfg.Sources {
		for _, name := range src.RedactHeaders {
			if name = textproto.CanonicalMIMEHeaderKey(name); !slices.Contains(rc.redact, name) {
				rc.redact = append(rc.redact, name)
			}
		}
	}
	for i := range cfg.Sources {
		src := cfg.Sources[i]
		src.RedactHeaders = rc.redact
		if src.Verifier != nil {
			src.Keys.Scheme = src.Verifier.Scheme()
		}
		rc.sources[src.Name] = &src
	}
	if rc.maxBody <= 0 {
		rc.maxBody = 1 << 20
	}
	if rc.log == nil {
		rc.log = slog.New(slog.DiscardHandler)
	}
	rc.log = rc.log.With(logComponent, "receiver")
	if rc.metrics == nil {
		rc.metrics = NewMetrics(nil)
	}
	if rc.now == nil {
		rc.now = time.Now
	}
	if rc.clock == nil {
		rc.clock = rc.now
	}
	if rc.wake == nil {
		rc.wake = func() {}
	}
	rc.bufs.New = func() any { return new(bytes.Buffer) }
	counter, _ := cfg.Store.(RejectionCounter)
	rc.rejects = newRejections(cfg.Rejections, counter, rc.log)
	return rc
}

// FlushRejections writes the counts of rejections not stored individually that are
// still held in memory (they are otherwise written within a few seconds). Call it
// after the server has stopped taking requests, before the store closes.
func (rc *Receiver) FlushRejections(ctx context.Context) error {
	return rc.rejects.flush(ctx)
}

// Register adds the receiver's routes to mux.
func (rc *Receiver) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /webhooks/{source}", rc.handleWebhook)
	// Any other method on the same path: without this the console's catch-all would
	// answer with its HTML page, and a provider's client expects JSON.
	mux.HandleFunc("/webhooks/{source}", rc.handleMethodNotAllowed)
	// Paths under /webhooks that name no source (/webhooks/, /webhooks/ota/,
	// /webhooks/a/b): answered as an unknown source is, in JSON, and a POST recorded as
	// one. Without these the console's catch-all answered its HTML page, and a
	// provider's misconfigured URL went uncounted.
	mux.HandleFunc("/webhooks/", rc.handleNoSource)
	mux.HandleFunc("/webhooks", rc.handleNoSource)
	mux.HandleFunc("GET /healthz", rc.handleHealth)
	mux.HandleFunc("GET /readyz", rc.handleReady)
	mux.Handle("GET /metrics", rc.metrics.Handler())
}

// answer is the JSON body of every intake response.
type answer struct {
	Status        string `json:"status,omitempty"`
	Key           string `json:"key,omitempty"`
	Delivery      string `json:"delivery,omitempty"`
	FirstDelivery string `json:"first_delivery,omitempty"`
	Error         string `json:"error,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, a answer) {
	var scratch [256]byte
	b := appendAnswer(scratch[:0], a)
	answerHeaders(w.Header(), "application/json", len(b))
	w.WriteHeader(code)
	w.Write(b)
}

// answerHeaders sets the headers of an answer of intake's: its type and length, and
// dataHeaders.
func answerHeaders(hd http.Header, contentType string, n int) {
	hd.Set("Content-Type", contentType)
	hd.Set("Content-Length", strconv.Itoa(n))
	dataHeaders(hd)
}

// nosniff is X-Content-Type-Options' value, its slice made once for the hot path.
var nosniff = []string{"nosniff"}

// dataHeaders sets what every answer of intake and of /metrics carries: nosniff. Each is
// data for a program (a sender, a probe, a scraper), never a page; an error quotes what
// a sender wrote (a source's name, a JSON fault), and a browser sent to the URL is not to
// guess HTML from it.
func dataHeaders(hd http.Header) { hd["X-Content-Type-Options"] = nosniff }

// appendAnswer appends a as json.Marshal writes it, and a newline: built by hand, as
// the reflection of json.Marshal costs more than the rest of the answer on the hot path.
func appendAnswer(b []byte, a answer) []byte {
	b = append(b, '{')
	for _, f := range [...]struct{ name, value string }{
		{`"status":`, a.Status}, {`"key":`, a.Key}, {`"delivery":`, a.Delivery},
		{`"first_delivery":`, a.FirstDelivery}, {`"error":`, a.Error},
	} {
		if f.value == "" {
			continue // omitempty
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, f.name...)
		b = storage.AppendJSONString(b, f.value)
	}
	return append(b, '}', '\n')
}

func (rc *Receiver) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, answer{Error: fmt.Sprintf(
		"method %s is not allowed: webhooks are delivered with POST", safeName(r.Method, 32))})
}

// handleNoSource answers a request to a path under /webhooks that names no source: a
// POST as an unknown source (recorded, counted), any other method with a JSON 404.
func (rc *Receiver) handleNoSource(w http.ResponseWriter, r *http.Request) {
	name := safeName(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/webhooks"), "/"), maxSourceName)
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusNotFound, answer{Error: fmt.Sprintf("unknown source %q: webhooks are delivered with POST to /webhooks/{source}", name)})
		return
	}
	rc.reject(w, r, &Source{Name: name, RedactHeaders: rc.redact}, nil, http.StatusNotFound, fmt.Sprintf("unknown source %q", name))
}

// CleanPaths answers, as a path under /webhooks that names no source is answered (in
// JSON, a POST recorded), a request whose path is under /webhooks but not in its clean
// form (/webhooks//ota, /webhooks/./ota, //webhooks/ota, /webhooks/ota/../stripe), and
// hands every other request to next. An http.ServeMux redirects such a path to its clean
// form with an empty 307: a provider's client that follows it delivers to whatever
// source the path cleans to, and one that does not goes uncounted.
func (rc *Receiver) CleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if clean := CleanPath(p); clean != p && (underWebhooks(p) || underWebhooks(clean)) {
			rc.handleNoSource(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// underWebhooks says whether path p is /webhooks or under it.
func underWebhooks(p string) bool { return p == "/webhooks" || strings.HasPrefix(p, "/webhooks/") }

// CleanPath is p as an http.ServeMux cleans it before it routes: "." and ".." elements
// and repeated slashes removed, a trailing slash kept. A mux redirects a path that is
// not its clean form, past every route.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}

// contentCoding returns the Content-Encoding of a request other than identity, as sent
// (cut to a bounded length), or "" for none: the body is taken as the bytes that were
// signed and are stored and forwarded, and no coding is undone. "UTF-8", which some
// senders put there for the body's character set, names no coding and counts as none.
func contentCoding(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") &&
				!strings.EqualFold(c, "utf-8") && !strings.EqualFold(c, "utf8") {
				return safeName(strings.TrimSpace(v), maxSourceName)
			}
		}
	}
	return ""
}

// compressions are the content codings of HTTP's registry that compress a body.
var compressions = []string{"gzip", "x-gzip", "deflate", "br", "compress", "x-compress", "zstd", "dcb", "dcz", "pack200-gzip", "exi", "aes128gcm"}

// compressed reports whether codings, a Content-Encoding as contentCoding returns it,
// lists a compression: a value that lists none ("latin1", a character set in the wrong
// header) is refused without sending the sender after a compression it never applied.
func compressed(codings string) bool {
	for c := range strings.SplitSeq(codings, ",") {
		if slices.ContainsFunc(compressions, func(k string) bool { return strings.EqualFold(strings.TrimSpace(c), k) }) {
			return true
		}
	}
	return false
}

// MaxHeaderBytes is the most that a delivery's request line and headers may take: one
// with more is refused 431, in JSON, and recorded as any rejection before the source's
// check. The HTTP server in front must let more through (net/http's own limit answers
// in plain text, and records nothing).
const MaxHeaderBytes = 64 << 10

// headerBytes is how many bytes r's request line and headers took as sent over
// HTTP/1.1, near enough: each header line's name, value, ": " and line end.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: ") + len(r.Host) + 2
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(v) + 4
		}
	}
	return n
}

// maxSourceName bounds what an unknown source's name costs us to record.
const maxSourceName = 64

// safeName is s as valid UTF-8 (each run of invalid bytes replaced by U+FFFD), cut to
// at most limit bytes on a character boundary: names from a request reach the
// database, the console and CSV exports, which all expect text.
func safeName(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func (rc *Receiver) handleWebhook(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := r.PathValue("source")
	src, ok := rc.sources[name]
	if !ok {
		name = safeName(name, maxSourceName)
		rc.reject(w, r, &Source{Name: name, RedactHeaders: rc.redact}, nil, http.StatusNotFound, fmt.Sprintf("unknown source %q", name))
		return
	}

	if n := headerBytes(r); n > MaxHeaderBytes {
		rc.reject(w, r, src, nil, http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("headers are larger than the limit of %d bytes (%d)", MaxHeaderBytes, n))
		return
	}
	if r.ContentLength > rc.maxBody {
		// Said up front: answered before a byte of it is read, so that a sender that
		// asked to continue (Expect: 100-continue) is not invited to upload it, and one
		// that declared more than it sends is not held until the read timeout.
		rc.reject(w, r, src, nil, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("body is larger than the limit of %d bytes (Content-Length: %d)", rc.maxBody, r.ContentLength))
		return
	}
	buf := rc.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer rc.bufs.Put(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, rc.maxBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rc.reject(w, r, src, nil, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("body is larger than the limit of %d bytes", rc.maxBody))
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			rc.reject(w, r, src, nil, http.StatusRequestTimeout, "the body did not arrive within the server's read timeout")
			return
		}
		// Never the error's own text: it names the connection's addresses.
		rc.reject(w, r, src, nil, http.StatusBadRequest, "the body could not be read: the connection broke off")
		return
	}
	body := buf.Bytes()
	if coding := contentCoding(r.Header); coding != "" {
		// A compressed body fails the signature over the sender's JSON, or its parse:
		// either answer would hide what is wrong.
		advice := "send the body uncompressed"
		if !compressed(coding) {
			advice = "it names no compression (a character set belongs in Content-Type's charset); send UTF-8 JSON without Content-Encoding"
		}
		rc.reject(w, r, src, nil, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Encoding %q is not supported: %s", coding, advice))
		return
	}
	if src.Batch != "" {
		rc.handleBatch(w, r, src, body, start)
		return
	}

	if err := rc.verify(src, r, body); err != nil {
		rc.reject(w, r, src, nil, http.StatusUnauthorized, "signature: "+err.Error())
		return
	}
	event, err := src.Event(r.Header, body)
	if err != nil {
		rc.reject(w, r, src, body, http.StatusBadRequest, err.Error())
		return
	}
	der, doc, err := derive(src.Keys, r.Header, event)
	if err != nil {
		rc.reject(w, r, src, body, deriveStatus(err), err.Error()+src.notJSONHint(r.Header, body, err))
		return
	}

	dv := src.delivery(r, der, doc, event, body)
	d := &dv
	d.Headers = src.storedHeaders(r.Header)
	err = rc.store.Record(r.Context(), d, rc.claimOptions(src))
	if err != nil {
		rc.storeFails.seen()
		// Storage says once that its file is gone; any other failure is logged at most
		// every storeFailureEvery.
		if !errors.Is(err, storage.ErrFileGone) {
			if log, unlogged := rc.storeFails.take(rc.now()); log {
				rc.log.Warn("delivery not stored", logSource, src.Name, logKey, der.Key, logErr, err, logUnlogged, unlogged)
			}
		}
		rc.metrics.Deliveries.WithLabelValues(src.Name, "error").Inc()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "the delivery could not be stored; retry later"})
		return
	}
	// Only a committed claim is timed: a 503 took no claim, however long it waited.
	rc.metrics.ClaimDuration.Observe(time.Since(start).Seconds())
	rc.noteStored()
	rc.metrics.Deliveries.WithLabelValues(src.Name, string(d.Outcome)).Inc()
	rc.metrics.flags(src.Name, d)
	a := answer{Status: string(d.Outcome), Key: d.Key, Delivery: strconv.FormatInt(d.ID, 10)}
	if d.Outcome == storage.Duplicate {
		a.FirstDelivery = strconv.FormatInt(d.FirstDelivery, 10)
	} else if src.ForwardURL != "" {
		rc.wake()
	}
	writeStored(w, src, a)
}

// deriveStatus is the answer to an event that derive refused: 422 when it has no key,
// 400 when it is not JSON that can be keyed; for a single delivery and a batch's item.
func deriveStatus(err error) int {
	if errors.Is(err, ErrNoKey) {
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// reject records a rejected delivery and answers code with reason. The body is kept only
// once the source's check has passed (body != nil): an unauthenticated sender must not be
// able to store content of its choosing, and its rejections are stored only as a bounded
// sample, the others counted (rejections.go).
func (rc *Receiver) reject(w http.ResponseWriter, r *http.Request, src *Source, body []byte, code int, reason string) {
	rc.rejectAs(w, r, src, body, code, reason, rejectionReason(code, body != nil))
}

// rejectAs is reject with the reason label of hookdedup_rejections_total given, for a
// rejection whose status alone does not tell it.
func (rc *Receiver) rejectAs(w http.ResponseWriter, r *http.Request, src *Source, body []byte, code int, reason, why string) {
	if c, ok := src.Verifier.(signature.Challenger); ok && code == http.StatusUnauthorized {
		// What a client that sends credentials only when asked waits for.
		w.Header().Set("WWW-Authenticate", c.Challenge())
	}
	label := src.Name
	if code == http.StatusNotFound {
		label = "" // unknown names must not grow the metric's label set
	}
	// A reason can quote the body (a member name, a pointer), and what an unauthenticated
	// sender chose must not be stored, answered and logged at any length.
	if body == nil {
		reason = cutReason(reason, maxSampleReason)
	} else {
		reason = cutReason(reason, maxReason)
		body = redactFields(body, src.RedactFields)
	}
	rc.metrics.Deliveries.WithLabelValues(label, string(storage.Rejected)).Inc()
	rc.metrics.Rejections.WithLabelValues(label, why).Inc()
	now := rc.clock()
	if body == nil && !rc.rejects.sample(r.RemoteAddr, now) {
		rc.rejects.count(src.Name, code != http.StatusNotFound, code, now)
		writeJSON(w, code, answer{Error: reason})
		return
	}
	d := &storage.Delivery{
		Source:      src.Name,
		Outcome:     storage.Rejected,
		Status:      code,
		Error:       reason,
		RemoteAddr:  r.RemoteAddr,
		ContentType: r.Header.Get("Content-Type"),
		Headers:     src.storedHeaders(r.Header),
		Body:        body,
	}
	if body == nil {
		d.Headers = boundHeaders(d.Headers, maxSampleHeaders, maxSampleHeaderValue)
		d.ContentType = safeName(d.ContentType, maxSampleContentType)
	}
	// WithoutCancel: a sender that hung up (a timed-out body) is still recorded.
	err := rc.store.Record(context.WithoutCancel(r.Context()), d, storage.ClaimOptions{})
	if err != nil {
		rc.storeFails.seen() // a readiness answer from before is not to be reused
	}
	if err != nil && !errors.Is(err, storage.ErrFileGone) {
		// The answer stays the rejection: the provider must fix the delivery, not retry it.
		// Logged at most every storeFailureEvery, as any store failure; counted, so that
		// the dashboard, once the counts are written, has it as the metrics do.
		if log, unlogged := rc.storeFails.take(rc.now()); log {
			rc.log.Warn("rejected delivery not stored", logSource, src.Name, logStatus, code, logErr, err, logUnlogged, unlogged)
		}
		rc.rejects.count(src.Name, body != nil || code != http.StatusNotFound, code, now)
	}
	rc.log.Info("delivery rejected", logSource, src.Name, logStatus, code, logReason, reason, logRemote, r.RemoteAddr)
	writeJSON(w, code, answer{Error: reason})
}

// cutReason is reason cut to at most limit bytes on a character boundary, ending in
// "…" where it was cut.
func cutReason(reason string, limit int) string {
	if len(reason) <= limit {
		return reason
	}
	return safeName(reason, limit-len("…")) + "…"
}

// rejectionReason is the reason label of hookdedup_rejections_total for a rejection
// answered code, before (authenticated false) or after the source's check passed.
func rejectionReason(code int, authenticated bool) string {
	switch code {
	case http.StatusNotFound:
		return "unknown_source"
	case http.StatusUnauthorized:
		return "signature"
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		return "too_large"
	case http.StatusRequestTimeout:
		return "timeout"
	case http.StatusUnprocessableEntity:
		return "no_key"
	case http.StatusBadRequest, http.StatusUnsupportedMediaType: // a compressed body is not read
		if authenticated {
			return "invalid_body"
		}
		return "unreadable"
	}
	return "other"
}

// boundHeaders keeps h's headers in name order, each value cut so that it takes at
// most valueLimit bytes as stored, until they take limit bytes as stored; if anything
// was cut it says so in X-Hookdedup-Truncated, within limit. As stored means as the
// JSON that storage keeps the headers in, where a '<', '>' or '&', a control character
// and each invalid UTF-8 byte take six bytes: counting the bytes received, a sender who
// pads with those stores six times the bound. Invalid UTF-8 is kept as U+FFFD, as the
// JSON would have it.
func boundHeaders(h http.Header, limit, valueLimit int) http.Header {
	mark := "headers cut to " + strconv.Itoa(limit) + " bytes as stored"
	// Room for the mark, always: {"X-Hookdedup-Truncated":["…"]} and a comma.
	budget := limit - (jsonLen(truncatedHeader) + jsonLen(mark) + 4)
	names := slices.Sorted(maps.Keys(h))
	out := make(http.Header, len(h))
	size, cut := 2, false // {}
	for _, name := range names {
		entry := jsonLen(name) + 3 // "name":[] and, but for the first, a comma
		if len(out) > 0 {
			entry++
		}
		for _, v := range h[name] {
			v = strings.ToValidUTF8(v, "\uFFFD")
			if jsonLen(v) > valueLimit {
				v, cut = cutJSON(v, valueLimit), true
			}
			add := jsonLen(v)
			if len(out[name]) > 0 {
				add++ // the comma between values
			} else {
				add += entry
			}
			if size+add > budget {
				cut = true
				break
			}
			size += add
			out[name] = append(out[name], v)
		}
	}
	if cut {
		out.Set(truncatedHeader, mark)
	}
	return out
}

// truncatedHeader marks a stored sample whose headers were cut.
const truncatedHeader = "X-Hookdedup-Truncated"

// jsonLen is the size of s as a JSON string, quotes included, as encoding/json writes
// it: '<', '>', '&', control characters other than \b \f \n \r \t, U+2028, U+2029 and
// each invalid UTF-8 byte as six bytes (\u003c, \ufffd …), '"' and '\\' as two.
func jsonLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += jsonRuneLen(r, size)
		i += size
	}
	return n
}

func jsonRuneLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029', r == '<', r == '>', r == '&':
		return 6
	case r == '"', r == '\\', r == '\b', r == '\f', r == '\n', r == '\r', r == '\t':
		return 2
	case r < 0x20:
		return 6
	}
	return size
}

// cutJSON returns the longest start of s, cut on a character boundary, that takes at
// most limit bytes as a JSON string (jsonLen).
func cutJSON(s string, limit int) string {
	n := 2
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if n += jsonRuneLen(r, size); n > limit {
			return s[:i]
		}
		i += size
	}
	return s
}

// credentialHeaders never reach storage: they carry secrets, not evidence.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// storedHeaders is h as it is stored: the credential headers and the source's
// RedactHeaders say "[redacted]". When none is there it is h itself, not a copy: the
// store writes the headers out before Record returns, and nothing changes them.
func (s *Source) storedHeaders(h http.Header) http.Header {
	if !s.holdsRedacted(h) {
		return h
	}
	out := h.Clone()
	for _, name := range credentialHeaders {
		if _, ok := out[name]; ok {
			out[name] = []string{"[redacted]"}
		}
	}
	for _, name := range s.RedactHeaders {
		if hasHeader(out, name) {
			out.Set(name, "[redacted]")
		}
	}
	return out
}

// holdsRedacted reports whether h has a header that storedHeaders redacts.
func (s *Source) holdsRedacted(h http.Header) bool {
	for _, name := range credentialHeaders {
		if _, ok := h[name]; ok {
			return true
		}
	}
	for _, name := range s.RedactHeaders {
		if hasHeader(h, name) {
			return true
		}
	}
	return false
}

// hasHeader reports whether h holds name with a value that is not empty, in any
// position: a check of the first value alone (h.Get) passes over a credential sent
// after an empty one. A header sent only empty is kept so, to show it came empty.
func hasHeader(h http.Header, name string) bool {
	vs, ok := h[name]
	if !ok {
		vs = h[textproto.CanonicalMIMEHeaderKey(name)]
	}
	for _, v := range vs {
		if v != "" {
			return true
		}
	}
	return false
}

func (rc *Receiver) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, answer{Status: "ok"})
}
