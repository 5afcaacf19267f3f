package receiver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

const (
	// eventIDHeaderPrefix marks an event id carried in a header rather than
	// in the body.
	eventIDHeaderPrefix = "header:"

	// derivedKeyPrefix starts every derived key. Event ids that start with it
	// are refused, so that a provider's id can never collide with a key
	// derived from another delivery's fields, and a key alone says how it
	// was made.
	derivedKeyPrefix = "derived:"

	// maxEventIDLen bounds an event id in bytes. Real ids (UUIDs, ULIDs,
	// "evt_..." strings, 64-bit integers) are far shorter; a longer one is
	// more likely a pointer aimed at the wrong field, and the key is stored,
	// indexed, shown on the console and sent downstream in a header.
	maxEventIDLen = 512

	// maxJSONDepth bounds how deeply arrays and objects may nest in a body.
	// Webhook payloads are a few levels deep; the bound keeps a small body
	// from costing deep nesting in the canonicaliser and the pointer lookups.
	maxJSONDepth = storage.MaxJSONDepth

	// maxSafeInteger is the largest integer n such that every integer up to
	// n is exactly a float64 (2^53 − 1, JavaScript's Number.MAX_SAFE_INTEGER).
	maxSafeInteger = 1<<53 - 1
)

var (
	// ErrNotJSON means the body is not a JSON document that can be
	// canonicalised (RFC 8785, so also I-JSON: no duplicate member names,
	// numbers within float64 range). The intake answers 400. Errors wrap it
	// with the reason.
	ErrNotJSON = errors.New("body is not valid JSON")

	// ErrNoKey means the delivery carries no usable event id and none of
	// the key fields: a key of nothing would make every such event a
	// duplicate of the first. The intake answers 422. Errors wrap it with
	// what was looked for.
	ErrNoKey = errors.New("no idempotency key")
)

// KeySpec says how a source's deliveries get their idempotency key.
type KeySpec struct {
	// EventID names where the provider's event id is: nowhere (empty), or one
	// place or more, each an RFC 6901 JSON pointer such as "/event_id" or
	// "/data/id", or "header:Webhook-Id". The first that holds a usable id gives
	// it: a sender that writes one id under two names in different events
	// (Channex's revision_id and booking_revision_id) is read under either.
	// A place may be qualified, "/payload/booking_revision_id when /event =
	// booking_new|booking_cancellation": it is read only in events whose
	// field (a pointer) holds one of the values, so that a sender that names
	// one id in events of different kinds can have only some of them share it.
	EventID []string
	// KeyFields are JSON pointers of stable business fields, hashed into
	// the key when there is no usable event id.
	KeyFields []string
	// Scheme is the source's signature scheme (New and the configuration set it
	// from the source's verifier). Under standard-webhooks an event id read from
	// webhook-id or svix-id is read from the family of headers the signature was
	// checked on (signature.IDHeaderOf).
	Scheme string
}

// EventIDText is where s looks for an event id, as the console and the command line
// say it: its places in order, joined by " or "; "" for none.
func (s KeySpec) EventIDText() string { return strings.Join(s.EventID, " or ") }

// Validate reports every bad pointer or header name in s, each naming the
// setting it came from, joined with errors.Join. A spec with neither EventID
// nor KeyFields is an error: no delivery could ever get a key.
//
// The empty pointer "" is valid RFC 6901 (the whole document), but Validate
// refuses it in KeyFields: a hash of the whole body changes with any volatile
// field, such as a send timestamp or an attempt counter, so redeliveries
// would not be recognised. Name the stable fields instead.
func (s KeySpec) Validate() error {
	var errs []error
	if len(s.EventID) == 0 && len(s.KeyFields) == 0 {
		return errors.New("set event_id or key_fields")
	}
	for i, from := range s.EventID {
		// Named as written: event_id "x" when it is one place, event_id[i] "x" in a list.
		setting := "event_id"
		if len(s.EventID) > 1 {
			setting = fmt.Sprintf("event_id[%d]", i)
		}
		from, when, values := splitEventIDPlace(from)
		if values != nil {
			if p := whenProblem(when, values); p != "" {
				errs = append(errs, fmt.Errorf("%s %q: %s", setting, s.EventID[i], p))
			}
		}
		if name, ok := strings.CutPrefix(from, eventIDHeaderPrefix); ok {
			if name == "" {
				errs = append(errs, fmt.Errorf("%s %q names no header", setting, from))
			} else if !validEventIDHeader(name) {
				errs = append(errs, fmt.Errorf("%s %q: %q is not a valid header name", setting, from, name))
			}
		} else if from == "" {
			errs = append(errs, fmt.Errorf("%s \"\" is the whole body, which is no id; name the id's field", setting))
		} else if p := pointerProblem(from); p != "" {
			errs = append(errs, fmt.Errorf("%s %q %s", setting, from, p))
		}
		if j := slices.Index(s.EventID[:i], s.EventID[i]); j >= 0 {
			errs = append(errs, fmt.Errorf("%s %q repeats event_id[%d]", setting, from, j))
		}
	}
	for i, f := range s.KeyFields {
		switch {
		case f == "":
			errs = append(errs, fmt.Errorf("key_fields[%d] %q is the whole body; name stable fields instead "+
				"(a hash of the whole body changes with any volatile field)", i, f))
		case strings.HasPrefix(f, eventIDHeaderPrefix):
			errs = append(errs, fmt.Errorf("key_fields[%d] %q: only event_id may name a header", i, f))
		default:
			if p := pointerProblem(f); p != "" {
				errs = append(errs, fmt.Errorf("key_fields[%d] %q %s", i, f, p))
				continue
			}
			// A repeat would add nothing to the key and could not be a
			// member name twice in the canonical JSON.
			for j := range i {
				if s.KeyFields[j] == f {
					errs = append(errs, fmt.Errorf("key_fields[%d] %q repeats key_fields[%d]", i, f, j))
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

// splitEventIDPlace cuts an event_id or amount_field place as storage.CutPlace does,
// with the values its qualifier names, for checking and saying them; values is nil for
// a plain place and empty for a qualifier without " = ".
func splitEventIDPlace(s string) (from, when string, values []string) {
	from, when, list, qualified := storage.CutPlace(s)
	if !qualified {
		return from, "", nil
	}
	values = []string{}
	if list != "" || strings.Contains(s, " = ") {
		values = strings.Split(list, "|")
		for i, v := range values {
			values[i] = strings.TrimSpace(v)
		}
	}
	return from, when, values
}

// whenProblem says what is wrong with an event id place's qualifier, "" if nothing.
func whenProblem(when string, values []string) string {
	switch {
	case len(values) == 0:
		return fmt.Sprintf("write the qualifier as \"when POINTER = VALUE|VALUE\", not %q", when)
	case strings.HasPrefix(when, eventIDHeaderPrefix) || when == "":
		return fmt.Sprintf("the qualifier's %q is not a JSON pointer to a field of the event", when)
	case pointerProblem(when) != "":
		return fmt.Sprintf("the qualifier's %q %s", when, pointerProblem(when))
	case slices.Contains(values, ""):
		return "the qualifier names an empty value"
	}
	return ""
}

// validEventIDHeader reports whether name is an RFC 9110 token, which is
// all a header field name may be.
func validEventIDHeader(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return name != ""
}

// Derive parses body once and returns its idempotency key; h is the
// delivery's headers, read for a "header:" event id. The key depends on the
// spec, the headers and the body alone: never on the time of receipt, and
// not on the source, which scopes keys where they are stored.
//
// The provider's event id is the key when the delivery carries a usable one.
// A string id is used as it decodes. A number id is used when it is an
// integer: as its RFC 8785 text up to 2^53 − 1 in magnitude (so 42, 42.0
// and 4.2e1 all give "42"), and beyond that only when written as plain
// digits, digit for digit, because a float64 would round distinct ids to
// one (9007199254740993 and 9007199254740992 both read as ...992). Any
// other id is treated as absent and the key falls back to the key fields:
// null, an object, array or boolean, a fraction or an exponent-spelled big
// number, an empty string or one of spaces alone, one longer than 512 bytes, one with control
// characters (it travels downstream in the Idempotency-Key header), one
// that starts with "derived:" or one with an escaped lone surrogate (text
// cut in the middle of a character, which no text column holds as it is).
// The fallback depends on the delivery alone, so every redelivery of an
// event falls back the same way.
//
// An escaped lone surrogate, which RFC 8259 allows and RFC 8785 does not,
// is kept as its escape (\ud83d) in the canonical body and key fields, so
// that texts differing only in it stay apart.
//
// Returns an error wrapping ErrNotJSON if the body is not JSON that RFC 8785
// can canonicalise: empty, malformed or followed by more data, not UTF-8 or
// starting with a byte-order mark, nested more than 64 arrays or objects
// deep, holding a number outside float64 range, or an object with a
// repeated member name (two parsers could disagree on which value counts).
// This holds even when the id comes from a header. Returns an error wrapping
// ErrNoKey, with PayloadHash and Fields still filled in, if there is no
// usable event id and no key field is present. Returns a plain error if
// spec fails Validate.
func Derive(spec KeySpec, h http.Header, body []byte) (storage.Derivation, error) {
	d, _, err := derive(spec, h, body)
	return d, err
}

// DeriveExplained is Derive, also saying why a key derived from the key fields was
// not taken from an event id, as the 422 of a delivery without key fields would say it
// (`event id "/id" is 1.5, not an integer`); that is "" when spec names no event id.
func DeriveExplained(spec KeySpec, h http.Header, body []byte) (d storage.Derivation, noEventID string, err error) {
	d, _, noEventID, err = deriveExplained(spec, h, body)
	if d.Method != storage.MethodDerived {
		noEventID = ""
	}
	return d, noEventID, err
}

// derive is Derive, also returning the canonical body, which intake reads the
// delivery's labels from (textAt) without canonicalising it again.
func derive(spec KeySpec, h http.Header, body []byte) (storage.Derivation, string, error) {
	d, doc, _, err := deriveExplained(spec, h, body)
	return d, doc, err
}

// deriveExplained is derive, also returning why no event id was usable.
func deriveExplained(spec KeySpec, h http.Header, body []byte) (d storage.Derivation, doc, noEventID string, err error) {
	if err := spec.Validate(); err != nil {
		return storage.Derivation{}, "", "", fmt.Errorf("key spec: %w", err)
	}
	// One copy of the canonical body, so that field values and the event id
	// can be slices of it instead of allocations of their own.
	doc, hash, err := canonicalBody(body)
	if err != nil {
		return storage.Derivation{}, "", "", err
	}
	d = storage.Derivation{PayloadHash: hash}

	id, from, why := eventID(spec, h, doc, body)
	if id != "" {
		d.Key, d.Method, d.EventIDFrom = id, storage.MethodEventID, from
		return d, doc, why, nil
	}

	d.Fields = make([]storage.Field, len(spec.KeyFields))
	present, valued, exact := false, false, false
	obj := make([]byte, 0, 128)
	obj = append(obj, '{')
	for i, p := range spec.KeyFields {
		v, ok := ptrLookup(doc, p)
		if !ok {
			v = "null"
		}
		if ok {
			// The canonical body holds the float64 of a big integer; the body as
			// sent holds its digits, which tell two ids apart.
			if ev, changed := exactAt(body, p, v); changed {
				v, exact = ev, true
			}
		}
		// A field that names null is as absent as one that names nothing:
		// telling them apart would let a body of nulls claim the key of nothing.
		ok = ok && v != "null"
		present = present || ok
		// An empty value enters the key as it is, but a key of empty values alone is a
		// key of nothing too: every such event would be the first one's duplicate.
		valued = valued || ok && !emptyValue(v)
		d.Fields[i] = storage.Field{Pointer: p, Present: ok, Value: v}
		if i > 0 {
			obj = append(obj, ',')
		}
		obj = appendPointerJSON(obj, p)
		obj = append(obj, ':')
		obj = append(obj, v...)
	}
	obj = append(obj, '}')
	if !valued {
		err := errNoKeyFor(why, spec.KeyFields, present)
		if doc[0] != '{' {
			err = fmt.Errorf("%w (%s)", err, notAnObject(doc[0]))
		}
		return d, doc, why, err
	}

	// The members are already canonical; canonicalising orders them and
	// normalises the pointers' spelling, which is all that is left of RFC 8785
	// here.
	var c []byte
	if exact {
		c, exact = appendCanonicalExact(nil, obj)
	}
	if !exact {
		c, err = canonicalize(obj)
	}
	if err != nil {
		return storage.Derivation{}, "", "", fmt.Errorf("canonicalise key fields: %w", err)
	}
	d.Method = storage.MethodDerived
	d.Canonical = string(c)
	d.Hash = keySHA256Hex(c)
	d.Key = derivedKeyPrefix + d.Hash
	return d, doc, why, nil
}

// eventID returns the first usable event id of the places spec names in the delivery
// (doc its canonical body, body as sent) and the place it was read from, as said (a
// header of the other family spelt as read); or "" and why none is usable, "" too when
// spec names no place.
func eventID(spec KeySpec, h http.Header, doc string, body []byte) (id, from, why string) {
	for _, place := range spec.EventID {
		from, when, list, qualified := storage.CutPlace(place)
		if qualified && !storage.PlaceListHas(list, textAt(doc, when)) {
			_, _, values := splitEventIDPlace(place) // said only: built only then
			if why != "" {
				why += ", "
			}
			why += fmt.Sprintf("event id %q is read only when %s is %s", from, when, strings.Join(values, " or "))
			continue
		}
		if name, ok := strings.CutPrefix(from, eventIDHeaderPrefix); ok {
			// Said as configured, unless the id is read from the other family's header,
			// which is said as its sender spells it (Shopify-Webhook-Id, svix-id).
			if read := signature.IDHeaderOf(spec.Scheme, name, h); !strings.EqualFold(read, name) {
				from = eventIDHeaderPrefix + read
			}
		}
		id, whyNot := findEventID(from, h, doc, body)
		if id != "" {
			return id, from, ""
		}
		if why != "" {
			why += ", "
		}
		why += whyNot
	}
	return "", "", why
}

// exactAt returns v, the canonical value at pointer p of the JSON event (as sent), with
// each integer written as plain digits that float64 rounded spelt as event spells it
// (appendCanonicalExact), and whether that changed v: RFC 8785 would make
// 9007199254740993 and 9007199254740992 one value. v as it is when nothing was rounded
// or event is nil.
func exactAt(event []byte, p, v string) (string, bool) {
	if event == nil || !mayBeRounded(v) {
		return v, false
	}
	rv, ok := ptrLookup(string(event), p)
	if !ok {
		return v, false
	}
	ex, ok := appendCanonicalExact(nil, []byte(rv))
	if !ok || string(ex) == v {
		return v, false
	}
	return string(ex), true
}

// mayBeRounded reports whether the canonical JSON v may hold a number that float64
// rounded: 16 digits in a row, or an exponent of 21 or more, outside a string. Digits
// inside strings (an id sent as text) are never rounded, and looking them up again in
// the body as sent would copy the body on every delivery for nothing.
func mayBeRounded(v string) bool {
	run := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			i = storage.JSONStringEnd(v, i) - 1 // at the closing quote
			run = 0
		case '0' <= c && c <= '9':
			if run++; run >= 16 {
				return true
			}
		case c == 'e' && i+1 < len(v) && v[i+1] == '+':
			return true
		default:
			run = 0
		}
	}
	return false
}

// maxText bounds what Text returns: it labels a delivery, it does not copy it.
const maxText = 200

// Text returns the value that pointer names in body, as the console labels a delivery
// with it: a string's text, a number's canonical spelling, other values as canonical
// JSON (cut at 200 bytes); "" when the pointer is empty or names nothing or null, or
// when body is not JSON that Derive accepts.
func Text(body []byte, pointer string) string {
	doc, _, err := canonicalBody(body)
	if err != nil {
		return ""
	}
	return textAt(doc, pointer)
}

// textAt is Text on doc, a body already canonicalised.
func textAt(doc, pointer string) string {
	if pointer == "" || doc == "" || pointerProblem(pointer) != "" {
		return ""
	}
	return labelText(ptrLookup(doc, pointer))
}

// labelText is a looked-up value (v, found) as Text gives it, a label as it is stored
// (storage.Label): the console's filters take what is typed without the spaces around
// it, so a property sent as "HTL-2 " would be listed under a ledger row of its own
// whose link found HTL-2's deliveries instead, and one of spaces alone under a row that
// looks like no property's and linked to every property's.
func labelText(v string, found bool) string {
	if !found || v == "null" {
		return ""
	}
	if v[0] == '"' {
		v = jsonStringValue(v)
	}
	v = storage.Label(v)
	if len(v) > maxText {
		// A cut may end in a blank, or in part of a character.
		v = storage.Label(strings.ToValidUTF8(v[:maxText], ""))
	}
	return v
}

// emptyValue reports whether the canonical JSON v is an empty string (or blanks alone,
// as storage.Label reads them), an empty object or an empty array: present, but no
// value that tells one event from another.
func emptyValue(v string) bool {
	return v == "{}" || v == "[]" || v[0] == '"' && storage.Label(jsonStringValue(v)) == ""
}

// notAnObject says, of a body whose JSON starts with c and is no object, why no field of
// an event was found in it: pointers read inside one event's object. An array is what
// a sender that puts several events in one request sends, which a source takes with
// batch.
func notAnObject(c byte) string {
	s := "the body is a JSON " + jsonKind(c) + ", not an object, and the key fields are read inside an event's object"
	if c == '[' {
		s += fmt.Sprintf("; a source takes several events in one request with batch, %q for a body that is itself the array", WholeBody)
	}
	return s
}

// errNoKeyFor builds the ErrNoKey error, saying what was looked for, so
// that the provider (who reads it in the 422) and the operator see why;
// empty says some key field was present, but empty.
func errNoKeyFor(why string, fields []string, empty bool) error {
	var b strings.Builder
	b.WriteString(why)
	if b.Len() > 0 {
		b.WriteString(", and ")
	}
	if len(fields) == 0 {
		b.WriteString("no key_fields are configured")
	} else {
		b.WriteString("none of the key fields ")
		for i, f := range fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(f))
		}
		if empty {
			b.WriteString(" holds a value (an empty string, object or array is none)")
		} else {
			b.WriteString(" is present")
		}
	}
	return fmt.Errorf("%w: %s", ErrNoKey, b.String())
}

// findEventID returns the delivery's usable event id, or "" and why there is
// none ("" too when the spec names no event id). doc is the canonical body;
// raw is the body as received, read only for a big integer's digits.
func findEventID(from string, h http.Header, doc string, raw []byte) (id, why string) {
	if from == "" {
		return "", ""
	}
	if name, ok := strings.CutPrefix(from, eventIDHeaderPrefix); ok {
		v := eventIDHeaderValue(h, name)
		if v == "" {
			return "", fmt.Sprintf("header %s is absent", name)
		}
		if p := eventIDProblem(v); p != "" {
			return "", fmt.Sprintf("header %s %s", name, p)
		}
		return v, ""
	}

	v, ok := ptrLookup(doc, from)
	if !ok {
		return "", fmt.Sprintf("event id %q is absent", from)
	}
	switch c := v[0]; {
	case c == '"':
		if hasLoneSurrogate(v) {
			// Read as text it would be U+FFFD, and two events whose ids differ only there
			// would share a key: the second silently a duplicate.
			return "", fmt.Sprintf("event id %q holds a lone surrogate (text cut in the middle of a character)", from)
		}
		id = jsonStringValue(v)
	case c == '-' || '0' <= c && c <= '9':
		id, why = numberEventID(from, v, raw)
		if why != "" {
			return "", fmt.Sprintf("event id %q %s", from, why)
		}
	case c == 'n':
		return "", fmt.Sprintf("event id %q is null", from)
	case c == '{':
		return "", fmt.Sprintf("event id %q is an object", from)
	case c == '[':
		return "", fmt.Sprintf("event id %q is an array", from)
	default:
		return "", fmt.Sprintf("event id %q is a boolean", from)
	}
	if p := eventIDProblem(id); p != "" {
		return "", fmt.Sprintf("event id %q %s", from, p)
	}
	return id, ""
}

// numberEventID turns the canonical number text v into an id, or says why it
// cannot be one.
func numberEventID(from, v string, raw []byte) (id, why string) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f != math.Trunc(f) {
		return "", fmt.Sprintf("is %s, not an integer", v)
	}
	if math.Abs(f) <= maxSafeInteger {
		return v, "" // RFC 8785 writes these as plain digits
	}
	// Past 2^53 the canonical text is a rounded float64. Only the digits
	// the provider wrote tell ids apart, and the raw body is valid JSON by
	// now, so the pointer resolves there too.
	lit, _ := ptrLookup(string(raw), from)
	if !isPlainInteger(lit) {
		return "", fmt.Sprintf("is %s, beyond 2^53 and not written as plain digits, so it cannot be read exactly", v)
	}
	return lit, ""
}

// isPlainInteger reports whether s is -?[1-9][0-9]* or 0, JSON's grammar for
// an integer with no fraction or exponent.
func isPlainInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// eventIDProblem says why a present id cannot be a key, or returns "".
func eventIDProblem(id string) string {
	switch {
	case id == "":
		return "is an empty string"
	case blankID(id):
		// Identifies no event, as "" does not: every event of a sender that fills the
		// field so would share one key, each after the first a silent duplicate.
		return "is spaces alone"
	case len(id) > maxEventIDLen:
		return fmt.Sprintf("is %d bytes long (limit %d)", len(id), maxEventIDLen)
	case strings.HasPrefix(id, derivedKeyPrefix):
		return fmt.Sprintf("starts with %q, which only derived keys may", derivedKeyPrefix)
	case !utf8.ValidString(id): // only a header can get here: the body is checked
		return "is not valid UTF-8"
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] == 0x7f {
			return "contains a control character"
		}
	}
	return ""
}

// blankID reports whether id holds spaces alone: white space as Unicode has it (the
// no-break and ideographic spaces among it) and invisible format characters (the
// zero-width spaces, the byte-order mark), which spell no id either.
func blankID(id string) bool {
	for _, r := range id {
		if !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// eventIDHeaderValue is h.Get(name), and also finds a name stored without
// canonical case, as in a header map built by hand rather than by net/http.
func eventIDHeaderValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0]
		}
	}
	return ""
}

// appendPointerJSON appends s as a JSON string. Canonicalisation re-spells it
// canonically afterwards, so this only has to be valid JSON, and pointers
// are almost always printable ASCII that needs no escaping at all.
func appendPointerJSON(dst []byte, s string) []byte {
	if !plainJSONString(s) {
		b, _ := json.Marshal(s) // s is valid UTF-8: Validate checked it
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func keySHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

var utf8BOM = []byte("\xef\xbb\xbf")

// canonBufs recycles the scratch space a body is canonicalised in: Derive keeps a string
// copy of the result, never the buffer.
var canonBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledCanon bounds the buffers kept in canonBufs: a rare megabyte body must not pin
// a megabyte per pooled buffer.
const maxPooledCanon = 64 << 10

// clampedFloat is how jsontext spells a number beyond float64's range once it has
// canonicalised it: the largest float64. RFC 8785 has no spelling for such a number, so
// a body whose canonical form holds this text is checked for one.
var clampedFloat = []byte("1.7976931348623157e+308")

// canonicalBody returns the RFC 8785 canonical form of body and the hex SHA-256 of it
// (of appendCanonicalValue's form, where that keeps an integer's digits), or an error
// wrapping ErrNotJSON that says what is wrong. The single-pass canonicaliser
// (canonical.go) writes it; what that one declines goes the reference way, which
// also explains what is wrong.
func canonicalBody(body []byte) (canon, hash string, err error) {
	bp := canonBufs.Get().(*[]byte)
	// A body the single-pass canonicaliser declines keeps RFC 8785's hash: only that one
	// keeps digits (appendCanonicalValue), and it would decline the body again.
	v, ok, unheld := appendCanonicalMode((*bp)[:0], body, keepNone)
	if !ok {
		v, err = canonicalBodyReference((*bp)[:0], body)
	}
	if cap(v) <= maxPooledCanon {
		*bp = v[:0]
		defer canonBufs.Put(bp)
	}
	if err != nil {
		return "", "", err
	}
	// The hash tells payloads apart by their integers' values: RFC 8785 rounds an
	// integer that float64 cannot hold, and two deliveries of a key that differ only
	// there would otherwise read as one payload, not a mismatch.
	if unheld {
		if ex, ok := appendCanonicalValue(nil, body); ok {
			return string(v), keySHA256Hex(ex), nil
		}
	}
	return string(v), keySHA256Hex(v), nil
}

// canonicalBodyReference appends to dst the canonical form of body as jsontext writes
// it, or returns an error wrapping ErrNotJSON that says what is wrong.
func canonicalBodyReference(dst, body []byte) ([]byte, error) {
	if err := precheckBody(body); err != nil {
		return dst, fmt.Errorf("%w: %s", ErrNotJSON, err)
	}
	mended := signature.MendLoneSurrogates(bytes.Clone(body))
	lone := !bytes.Equal(mended, body)
	if lone {
		// U+FFFD in place of each lone surrogate may make two names one: what else is
		// wrong is said first, and a duplicate only if nothing is.
		c := jsontext.Value(bytes.Clone(mended))
		if err := c.Canonicalize(jsontext.AllowDuplicateNames(true)); err != nil {
			return dst, fmt.Errorf("%w: %s", ErrNotJSON, explainJSON(err))
		}
		if bytes.Contains(c, clampedFloat) {
			if err := numbersInRange(mended); err != nil {
				return dst, fmt.Errorf("%w: %s", ErrNotJSON, err)
			}
		}
	}
	v := jsontext.Value(append(dst, mended...))
	if err := v.Canonicalize(); err != nil {
		return v, fmt.Errorf("%w: %s", ErrNotJSON, explainJSON(err))
	}
	if bytes.Contains(v, clampedFloat) {
		if err := numbersInRange(mended); err != nil {
			return v, fmt.Errorf("%w: %s", ErrNotJSON, err)
		}
	}
	if lone {
		// The single-pass canonicaliser declined a body that, read with U+FFFD, is
		// valid: its canonical form here would have lost the surrogates, and with them
		// what tells two texts apart. Refused, never keyed so.
		return v, fmt.Errorf("%w: a lone surrogate in a body this server cannot canonicalise", ErrNotJSON)
	}
	return v, nil
}

// numbersInRange reports the first number in body (valid JSON) that float64 cannot hold:
// canonicalisation would have written it as the largest float64 instead.
func numbersInRange(body []byte) error {
	outOfRange, _ := scanBody(body)
	return outOfRange
}

// numberByte marks the bytes a JSON number is written with.
var numberByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789+-.eE") {
		t[c] = true
	}
	return t
}()

// precheckBody catches, with the byte offset where it happens, what the
// parser would report less plainly or not at all: an empty body, a
// byte-order mark, invalid UTF-8, and nesting past maxJSONDepth (jsontext
// allows 10,000 levels). It only scans; jsontext does the parsing.
func precheckBody(body []byte) error {
	_, err := scanBody(body)
	return err
}

// scanBody is precheckBody's scan, which also finds the first number that float64
// cannot hold (outOfRange): a caller that needs both reads the body once. That one is
// for a body the parser then finds valid, so it is said after what the parser says.
// Only a number with an exponent or of more than 308 characters can be one, so the
// others are passed over without being read.
func scanBody(body []byte) (outOfRange, err error) {
	if bytes.HasPrefix(body, utf8BOM) {
		return nil, errors.New("body starts with a UTF-8 byte-order mark")
	}
	if enc := wideEncoding(body); enc != "" {
		// Said before its bytes are found not to be UTF-8, or a NUL not to start a value:
		// either would leave the sender to guess that the whole body is in another encoding.
		return nil, fmt.Errorf("body is %s, not UTF-8: send JSON in UTF-8 (RFC 8259)", enc)
	}
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("invalid UTF-8 at byte %d", invalidUTF8At(body))
	}
	depth, empty := 0, true
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			i = storage.JSONStringEnd(body, i) - 1 // at the closing quote
		case '[', '{':
			depth++
			if depth > maxJSONDepth {
				return nil, fmt.Errorf("nested deeper than %d levels at byte %d", maxJSONDepth, i)
			}
		case ']', '}':
			depth--
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			start, exponent := i, false
			for ; i < len(body) && numberByte[body[i]]; i++ {
				exponent = exponent || body[i] == 'e' || body[i] == 'E'
			}
			if lit := body[start:i]; outOfRange == nil && (exponent || len(lit) > 308) {
				if f, err := strconv.ParseFloat(string(lit), 64); err != nil && math.IsInf(f, 0) {
					outOfRange = fmt.Errorf("number outside the float64 range: %q at byte %d", lit, start)
				}
			}
			i-- // the byte after the number
		}
		empty = false
	}
	if empty {
		return nil, errors.New("empty body")
	}
	return outOfRange, nil
}

// wideEncoding names the encoding of body when it is UTF-16 or UTF-32, as RFC 4627 (3)
// tells one from its first four bytes: a byte-order mark, or the NULs beside its first
// two characters, which are ASCII in any JSON text; "" otherwise. It never names one for
// JSON in UTF-8, whose first two bytes hold no NUL.
func wideEncoding(body []byte) string {
	switch {
	case bytes.HasPrefix(body, []byte{0, 0, 0xfe, 0xff}):
		return "UTF-32 (big-endian)"
	case bytes.HasPrefix(body, []byte{0xff, 0xfe, 0, 0}):
		return "UTF-32 (little-endian)"
	case bytes.HasPrefix(body, []byte{0xfe, 0xff}):
		return "UTF-16 (big-endian)"
	case bytes.HasPrefix(body, []byte{0xff, 0xfe}):
		return "UTF-16 (little-endian)"
	case len(body) < 4:
		return ""
	}
	b0, b1, b2, b3 := body[0] == 0, body[1] == 0, body[2] == 0, body[3] == 0
	switch {
	case b0 && b1 && b2 && !b3:
		return "UTF-32 (big-endian)"
	case !b0 && b1 && b2 && b3:
		return "UTF-32 (little-endian)"
	case b0 && !b1 && b2 && !b3:
		return "UTF-16 (big-endian)"
	case !b0 && b1 && !b2 && b3:
		return "UTF-16 (little-endian)"
	}
	return ""
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// maxQuotedName bounds a member name or pointer from the body quoted in a reason.
const maxQuotedName = 64

// explainJSON turns a jsontext error into the reason the provider reads in the 400: what
// is wrong, in which value (a JSON pointer) and at which byte. TestDerive_NotJSON pins
// each wording, so an upgrade that changes one fails loudly rather than silently
// degrading the message.
func explainJSON(err error) string {
	msg := strings.Replace(strings.TrimPrefix(err.Error(), "jsontext: "), " after offset ", " at byte ", 1)
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return msg
	}
	switch {
	case se.Err == jsontext.ErrDuplicateName:
		// jsontext quotes the member name whole, and it is the sender's to make as long
		// as the body: the reason must point at it, not copy it.
		msg = "duplicate object member name " + strconv.Quote(cutReason(se.JSONPointer.LastToken(), maxQuotedName))
		if within := se.JSONPointer.Parent(); within != "" {
			msg += " within " + strconv.Quote(cutReason(string(within), maxQuotedName))
		}
		return msg + fmt.Sprintf(" at byte %d", se.ByteOffset)
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		return "unexpected end of body"
	case strings.Contains(se.Err.Error(), "after top-level value"):
		return fmt.Sprintf("more data after the JSON value at byte %d", se.ByteOffset)
	case se.ByteOffset > 0 && !strings.Contains(msg, " at byte "):
		return msg + fmt.Sprintf(" at byte %d", se.ByteOffset)
	}
	return msg
}
