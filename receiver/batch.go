package receiver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/hookdedup/hookdedup/storage"
)

// Batched deliveries: one request that carries several events (Adyen's
// notificationItems, Mews' Events). Each item is verified (where the scheme signs
// items), keyed, claimed, stored and handed downstream on its own; the request is
// accepted or refused whole, and all its items commit in one transaction before the
// answer.

// DefaultMaxBatchItems is a batched source's item limit when Source.MaxBatchItems is 0.
const DefaultMaxBatchItems = 1000

// WholeBody is the batch of a sender whose body is itself the array of events
// (`[{…},{…}]`): RFC 6901's URI fragment spelling of the pointer to the whole document,
// whose plain spelling, "", leaves batch unset.
const WholeBody = "#"

// batchPointer is the RFC 6901 pointer that batch names.
func batchPointer(batch string) string {
	if batch == WholeBody {
		return ""
	}
	return batch
}

var (
	// ErrBadBatch means a batched source's body is JSON but not the shape its batch
	// and item pointers describe: no array where the batch should be, an empty one,
	// or an element without its item. The intake answers 422. Errors wrap it with
	// what was wrong and where.
	ErrBadBatch = errors.New("not a batch")

	// ErrTooManyItems means a batch holds more items than the source's limit. The
	// intake answers 413.
	ErrTooManyItems = errors.New("too many items")

	// ErrBatchHeaderID is CheckBatch's refusal of an event id read from a header, which
	// would give every item of a request one key.
	ErrBatchHeaderID = errors.New("names a header, which every item of a batch shares")
)

// ItemVerifier is implemented by a Verifier whose signatures sit inside each item of a
// batch rather than on the request (the adyen scheme). A batched source with such a
// verifier checks every item with VerifyItem, and does not call Verify on the request.
type ItemVerifier interface {
	// VerifyItem returns nil when the item (the JSON that the source's item pointer
	// names) is authentic; otherwise an error that says what was wrong and never
	// contains a secret.
	VerifyItem(item []byte) error
}

// SplitBatch returns the items of a batched body: the elements of the array that the
// batch pointer names, each narrowed to the value that the item pointer names inside
// it ("" for the element itself). Each item is a slice of body, the sender's own bytes,
// not a re-encoding. At most limit items are taken (0: DefaultMaxBatchItems). It also
// returns the request's envelope (batchEnvelope), what each item is handed downstream
// with, from the one scan of the body that found the items.
//
// Returns an error wrapping ErrNotJSON if body is not valid JSON, ErrBadBatch if it is
// not shaped as the pointers say (each error names the pointer, or the item's index),
// and ErrTooManyItems, naming the count and the limit, past limit.
func SplitBatch(body []byte, batch, item string, limit int) (items [][]byte, envelope string, err error) {
	if limit <= 0 {
		limit = DefaultMaxBatchItems
	}
	outOfRange, err := scanBody(body)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s", ErrNotJSON, err)
	}
	if !jsontext.Value(body).IsValid() {
		// canonicalBody says what is wrong, at which byte; it takes in an escaped lone
		// surrogate, which jsontext refuses.
		if _, _, err := canonicalBody(body); err != nil {
			return nil, "", err
		}
	}
	// Each item's numbers are checked as it is keyed, but a number outside them (in the
	// envelope, which goes downstream with every item, or beside an item in its element)
	// would never be: the body is refused as a single delivery's is.
	if outOfRange != nil {
		return nil, "", fmt.Errorf("%w: %s", ErrNotJSON, outOfRange)
	}
	doc := string(body)
	start, end, ok := ptrSpan(doc, batchPointer(batch))
	if !ok {
		return nil, "", fmt.Errorf("%w: the batch %q is absent", ErrBadBatch, batch)
	}
	if doc[start] != '[' {
		return nil, "", fmt.Errorf("%w: the batch %q is a JSON %s, not an array", ErrBadBatch, batch, jsonKind(doc[start]))
	}

	// The elements' spans, counted to the end so that the limit's error can say how
	// many there were; counting is a scan, the work per item comes later.
	var spans [][2]int
	n := 0
	for i := jsonSkipSpace(doc, start+1); i < end && doc[i] != ']'; {
		e := jsonSkipValue(doc, i)
		if n < limit {
			spans = append(spans, [2]int{i, e})
		}
		n++
		i = jsonSkipSpace(doc, e)
		if i < end && doc[i] == ',' {
			i = jsonSkipSpace(doc, i+1)
		}
	}
	switch {
	case n == 0:
		return nil, "", fmt.Errorf("%w: the batch %q is empty: there is no event to key", ErrBadBatch, batch)
	case n > limit:
		return nil, "", fmt.Errorf("%w: the batch %q has %d items, more than max_batch_items (%d)",
			ErrTooManyItems, batch, n, limit)
	}

	items = make([][]byte, len(spans))
	for k, sp := range spans {
		s, e := sp[0], sp[1]
		if item != "" {
			if doc[s] != '{' && doc[s] != '[' {
				// "5" holds no member: saying its event is absent would hide what it is.
				return nil, "", fmt.Errorf("%w: item %d is a JSON %s, not an object holding %q", ErrBadBatch, k, jsonKind(doc[s]), item)
			}
			is, ie, ok := ptrSpan(doc[s:e], item)
			if !ok {
				return nil, "", fmt.Errorf("%w: item %d: %q is absent", ErrBadBatch, k, item)
			}
			s, e = s+is, s+ie
		}
		if doc[s] != '{' {
			return nil, "", fmt.Errorf("%w: item %d is a JSON %s, not an object", ErrBadBatch, k, jsonKind(doc[s]))
		}
		items[k] = body[s:e:e]
	}
	return items, batchEnvelope(doc, batch, start, end), nil
}

// batchEnvelope is what a batched request says of all its events together (Mews'
// EnterpriseId and IntegrationId, Adyen's live): doc, the request's valid JSON, without
// the array of events at doc[start:end], which the pointer batch names. The array goes
// with its member from an object; in an array it leaves null in its place, as taking
// it out would renumber what follows. The whitespace between tokens goes too, and every
// name, string and number stays as the sender wrote it: RFC 8785 would respell 1.50 and
// round an id past 2^53, and the downstream needs what was sent. It is never longer
// than doc, and costs nothing but a copy of what is outside the array.
func batchEnvelope(doc, batch string, start, end int) string {
	if batch == WholeBody {
		return "" // nothing but the events: as a request of one event, none
	}
	from, to, fill := start, end, "null"
	if ps, _, ok := ptrSpan(doc, batch[:strings.LastIndexByte(batch, '/')]); ok && doc[ps] == '{' {
		comma := -1 // the comma before the member looked at, if any
		for i := ps + 1; i < len(doc); {
			key := jsonSkipSpace(doc, i)
			i = jsonSkipSpace(doc, jsonSkipSpace(doc, storage.JSONStringEnd(doc, key))+1) // past the ':'
			if i == start {
				// The member goes with one comma: the one after it, or else the one
				// before it (the last member), or none (the only one).
				from, fill = key, ""
				if after := jsonSkipSpace(doc, end); after < len(doc) && doc[after] == ',' {
					to = after + 1
				} else if comma >= 0 {
					from = comma
				}
				break
			}
			comma = jsonSkipSpace(doc, jsonSkipValue(doc, i))
			if comma >= len(doc) || doc[comma] != ',' {
				break // not found: null in its place still leaves valid JSON
			}
			i = comma + 1
		}
	}
	var b strings.Builder
	b.Grow(len(doc) - (to - from) + len(fill))
	appendCompact(&b, doc[:from])
	b.WriteString(fill)
	appendCompact(&b, doc[to:])
	return b.String()
}

// appendCompact writes s, JSON text cut at token boundaries, to b without the
// whitespace between its tokens; strings are copied as they are.
func appendCompact(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			e := storage.JSONStringEnd(s, i)
			b.WriteString(s[i:e])
			i = e
		default:
			b.WriteByte(c)
			i++
		}
	}
}

// jsonKind names the kind of the JSON value that starts with c, for messages.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// batchAnswer is the JSON answer to a batched request: one result per item, in the
// request's order.
type batchAnswer struct {
	Status string       `json:"status"` // "batch"
	Batch  string       `json:"batch"`  // the first item's delivery id
	Items  []itemAnswer `json:"items"`
}

type itemAnswer struct {
	Index         int    `json:"index"`
	Status        string `json:"status"`
	Key           string `json:"key"`
	Delivery      string `json:"delivery"`
	FirstDelivery string `json:"first_delivery,omitempty"`
	Mismatch      bool   `json:"mismatch,omitempty"`
}

// handleBatch is the intake of a batched source, from a body read whole to the answer.
func (rc *Receiver) handleBatch(w http.ResponseWriter, r *http.Request, src *Source, body []byte, start time.Time) {
	iv, perItem := src.Verifier.(ItemVerifier)
	// An item verifier's request is authenticated only once every item is: until then
	// its body is the sender's choice and is not kept (reject with a nil body).
	var kept []byte
	if !perItem {
		// rc.verify, as a single delivery does: a timestamped scheme's skew is
		// recorded for batches too.
		if err := rc.verify(src, r, body); err != nil {
			rc.reject(w, r, src, nil, http.StatusUnauthorized, "signature: "+err.Error())
			return
		}
		kept = body
	}
	items, envelope, err := SplitBatch(body, src.Batch, src.Item, src.MaxBatchItems)
	if err != nil {
		code, why := http.StatusBadRequest, ""
		switch {
		case errors.Is(err, ErrTooManyItems):
			code = http.StatusRequestEntityTooLarge
		case errors.Is(err, ErrBadBatch):
			// A body not shaped as the batch is an invalid body, whatever its keys, once
			// the request is authenticated; before (the items are signed each), anyone's
			// body that could not be taken apart.
			code, why = http.StatusUnprocessableEntity, "unreadable"
			if kept != nil {
				why = "invalid_body"
			}
		}
		rc.rejectAs(w, r, src, kept, code, err.Error()+src.notJSONHint(r.Header, body, err), cmp.Or(why, rejectionReason(code, kept != nil)))
		return
	}
	// Every signature before any key: a request with a forged item is refused as
	// unauthenticated, whatever else is wrong with it.
	if perItem {
		for i, item := range items {
			if err := iv.VerifyItem(item); err != nil {
				rc.reject(w, r, src, nil, http.StatusUnauthorized, fmt.Sprintf("item %d: signature: %v", i, err))
				return
			}
		}
		kept = body
	}

	ds := make([]storage.Delivery, len(items))
	ptrs := make([]*storage.Delivery, len(items))
	for i, item := range items {
		der, doc, err := derive(src.Keys, r.Header, item)
		if err != nil {
			rc.reject(w, r, src, kept, deriveStatus(err), fmt.Sprintf("item %d: %v", i, err))
			return
		}
		ds[i] = src.delivery(r, der, doc, item, item)
		ds[i].BatchIndex = i
		ptrs[i] = &ds[i]
	}
	// The request's headers and its envelope are stored once, with the first item, and
	// the other items read the envelope from there (storage.Delivery.BatchEnvelope):
	// both are the same for every item, and a copy with each would let a request of a
	// thousand tiny events, duplicates included, store a thousand times their size.
	ds[0].Headers = src.storedHeaders(r.Header)
	ds[0].BatchEnvelope = envelope

	err = rc.store.RecordBatch(r.Context(), ptrs, rc.claimOptions(src))
	if err != nil {
		rc.storeFails.seen()
		if !errors.Is(err, storage.ErrFileGone) {
			if log, unlogged := rc.storeFails.take(rc.now()); log {
				rc.log.Warn("batch not stored", logSource, src.Name, logItems, len(items), logErr, err, logUnlogged, unlogged)
			}
		}
		rc.metrics.Deliveries.WithLabelValues(src.Name, "error").Add(float64(len(items)))
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "the batch could not be stored; retry later"})
		return
	}

	rc.metrics.ClaimDuration.Observe(time.Since(start).Seconds())
	rc.noteStored()
	a := batchAnswer{Status: "batch", Batch: strconv.FormatInt(ds[0].Batch, 10), Items: make([]itemAnswer, len(ds))}
	accepted := false
	for i := range ds {
		d := &ds[i]
		rc.metrics.Deliveries.WithLabelValues(src.Name, string(d.Outcome)).Inc()
		rc.metrics.flags(src.Name, d)
		ia := itemAnswer{Index: i, Status: string(d.Outcome), Key: d.Key, Delivery: strconv.FormatInt(d.ID, 10),
			Mismatch: d.Mismatch}
		if d.Outcome == storage.Duplicate {
			ia.FirstDelivery = strconv.FormatInt(d.FirstDelivery, 10)
		} else {
			accepted = true
		}
		a.Items[i] = ia
	}
	if accepted && src.ForwardURL != "" {
		rc.wake()
	}
	rc.writeBatchAnswer(w, src, a)
}

// writeBatchAnswer sends the answer to a batched request that has committed. The JSON
// with one result per item is the default; a sender that expects a fixed body instead
// (Adyen's literal "[accepted]") gets it here, as its source's answer setting says.
func (rc *Receiver) writeBatchAnswer(w http.ResponseWriter, src *Source, a batchAnswer) {
	if src.Answer == AnswerAccepted {
		writeAccepted(w)
		return
	}
	b, err := json.Marshal(a)
	if err != nil { // strings, ints and bools only: cannot fail
		writeJSON(w, http.StatusInternalServerError, answer{Error: "the answer could not be written"})
		return
	}
	answerHeaders(w.Header(), "application/json", len(b)+1)
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}

// CheckBatch reports the first thing wrong with a batched source's settings: batch must
// be an RFC 6901 pointer, or WholeBody (not "", which leaves a source unbatched), item
// one or "" (the element itself), and the key cannot come from a header, which every
// item of a request shares. Errors name the setting.
func CheckBatch(batch, item string, spec KeySpec) error {
	if batch == "" {
		return fmt.Errorf(`batch: "" leaves the source unbatched; name the array of events, such as "/events", or %q for a body that is itself the array`, WholeBody)
	}
	if p := pointerProblem(batch); p != "" && batch != WholeBody {
		if strings.HasPrefix(batch, WholeBody+"/") {
			p += fmt.Sprintf(" (%q alone names the whole body; a pointer inside it is written without the %q: %q)", WholeBody, WholeBody, batch[1:])
		}
		return fmt.Errorf("batch: %q %s", batch, p)
	}
	if p := pointerProblem(item); p != "" {
		return fmt.Errorf("item: %q %s", item, p)
	}
	for _, from := range spec.EventID {
		if strings.HasPrefix(storage.PlacePointer(from), eventIDHeaderPrefix) {
			return fmt.Errorf("event_id: %q %w: name a field inside the item instead", from, ErrBatchHeaderID)
		}
	}
	return nil
}
