package receiver

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// DefaultBusinessWindow is how far back a business key is looked for when a source sets
// business_key without business_window: two weeks.
const DefaultBusinessWindow = 14 * 24 * time.Hour

// Correlation is one source's part in a correlation rule: where its events carry the
// booking, the amount and the currency that the rule compares across sources, and
// optionally which events the rule reads (refunds only, say).
type Correlation struct {
	// Rule names the rule; Window is how far back it looks through its other sources.
	Rule   string
	Window time.Duration
	// Booking, Amount and Currency are JSON pointers; an event that lacks one of them
	// is not read by the rule.
	Booking, Amount, Currency string
	// AmountMinorUnits says Amount counts the currency's minor units (cents), so that
	// 12000 from one source equals "120.00" from another.
	AmountMinorUnits bool
	// Kind, when set, points at the event's kind, and the rule reads only events whose
	// kind is one of Kinds.
	Kind  string
	Kinds []string
}

// Check reports the first thing wrong with c, naming the setting. Pointers must be
// RFC 6901 pointers; booking, amount and currency are required, and kind and kinds go
// together.
func (c Correlation) Check() error {
	if c.Window <= 0 {
		return errors.New("window: must be positive")
	}
	for _, p := range []struct{ field, pointer string }{
		{"booking", c.Booking}, {"amount", c.Amount}, {"currency", c.Currency},
	} {
		if p.pointer == "" {
			return fmt.Errorf("%s: is required (a JSON pointer such as \"/refund/%s\")", p.field, p.field)
		}
		if err := CheckPointer(p.pointer); err != nil {
			return fmt.Errorf("%s: %w", p.field, err)
		}
	}
	switch {
	case c.Kind != "" && len(c.Kinds) == 0:
		return fmt.Errorf("kinds: is required with kind %q (the values of kind the rule reads, such as [\"refund\"])", c.Kind)
	case c.Kind == "" && len(c.Kinds) > 0:
		return errors.New("kind: is required with kinds (the JSON pointer to the event's kind)")
	case c.Kind != "":
		if err := CheckPointer(c.Kind); err != nil {
			return fmt.Errorf("kind: %w", err)
		}
	}
	return nil
}

// CheckBusinessKey reports the first thing wrong with a business_key: each field must
// be an RFC 6901 pointer to a part of the body, named once.
func CheckBusinessKey(fields []string) error {
	for i, f := range fields {
		if f == "" {
			return fmt.Errorf("business_key[%d]: \"\" is the whole body; name the fields that identify the business event", i)
		}
		if err := CheckPointer(f); err != nil {
			return fmt.Errorf("business_key[%d]: %w", i, err)
		}
		if j := slices.Index(fields[:i], f); j >= 0 {
			return fmt.Errorf("business_key[%d] %q repeats business_key[%d]", i, f, j)
		}
	}
	return nil
}

// CheckNoMoney reports the first bad condition of a no_money setting, naming it: each
// "POINTER = VALUE|VALUE", a JSON pointer to a field of the event and the values that
// mark an event that moved no money.
func CheckNoMoney(conds []string) error {
	for i, cond := range conds {
		at, list, ok := storage.CutCondition(cond)
		values := strings.Split(list, "|")
		for j := range values {
			values[j] = strings.TrimSpace(values[j])
		}
		switch {
		case !ok:
			return fmt.Errorf("no_money[%d] %q: write it as \"POINTER = VALUE|VALUE\", such as \"/status = failed|canceled\"", i, cond)
		case slices.Contains(values, ""):
			return fmt.Errorf("no_money[%d] %q: names an empty value", i, cond)
		}
		if err := CheckPointer(at); err != nil {
			return fmt.Errorf("no_money[%d]: %w", i, err)
		}
	}
	return nil
}

// CheckPointer returns an error naming what is wrong with p as a JSON pointer, nil when
// it is one.
func CheckPointer(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q is not a JSON pointer (it must start with \"/\")", p)
	}
	if problem := pointerProblem(p); problem != "" {
		return fmt.Errorf("%q %s", p, problem)
	}
	return nil
}

// CheckAmountField reports the first bad place of an amount_field setting, naming it:
// each a JSON pointer, which may be qualified as an event_id place is.
func CheckAmountField(places []string) error {
	for i, place := range places {
		setting := "amount_field"
		if len(places) > 1 {
			setting = fmt.Sprintf("amount_field[%d]", i)
		}
		from, when, values := splitEventIDPlace(place)
		if values != nil {
			if p := whenProblem(when, values); p != "" {
				return fmt.Errorf("%s %q: %s", setting, place, p)
			}
		}
		if err := CheckPointer(from); err != nil {
			return fmt.Errorf("%s: %w", setting, err)
		}
	}
	return nil
}

// businessKey is the hex SHA-256 of the RFC 8785 canonical JSON of the object
// {pointer: value} over the source's business key fields in the document x indexes, as
// a derived key is made; "" when the source has none, or when a field is absent, null,
// an empty string (or blanks alone), or an empty object or array: a key of fewer fields
// would match events that differ in the missing one, and two events with no booking id
// ("", or a booking object with nothing in it) are not one booking's.
func (s *Source) businessKey(x *docIndex) string {
	if len(s.BusinessKey) == 0 {
		return ""
	}
	// The values are slices of doc, canonical already; the members go in the order of
	// their names (plain ASCII pointers sort byte for byte as RFC 8785 sorts them), so
	// that the object is canonical without a canonicaliser's pass, which is the costly
	// part. Any other pointer spelling takes that pass.
	var order [8]int
	idx := order[:0]
	for i := range s.BusinessKey {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(s.BusinessKey[a], s.BusinessKey[b]) })
	plain, exact := true, false
	var buf [128]byte // on the stack: the object is hashed, never kept
	obj := append(buf[:0], '{')
	for n, i := range idx {
		p := s.BusinessKey[i]
		v, ok := x.lookup(p)
		if !ok || v == "null" || emptyValue(v) {
			// Blanks alone are as empty as "", as a correlation rule takes them. The
			// document is canonical: an empty object or array is spelt so.
			return ""
		}
		// As for a derived key: the digits as sent, not the float64 that would make two
		// bookings one.
		if ev, changed := x.exactValue(p, v); changed {
			v, exact = ev, true
		}
		if n > 0 {
			obj = append(obj, ',')
		}
		plain = plain && plainJSONString(p)
		obj = appendPointerJSON(obj, p)
		obj = append(obj, ':')
		obj = append(obj, v...)
	}
	obj = append(obj, '}')
	if exact {
		if c, ok := appendCanonicalExact(nil, obj); ok {
			return keySHA256Hex(c)
		}
		return ""
	}
	if !plain {
		// A copy goes to the canonicaliser, so that buf need not live on the heap.
		c, err := canonicalize(bytes.Clone(obj))
		if err != nil {
			return ""
		}
		return keySHA256Hex(c)
	}
	return keySHA256Hex(obj)
}

// plainJSONString reports whether s is printable ASCII with nothing to escape: as a JSON
// string it is '"', s, '"', in RFC 8785 as anywhere.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// correlationKeys are what the source's correlation rules read of the document x
// indexes: for each rule whose kind filter the event passes and whose booking, amount
// and currency it carries, the hash of those three, the amount as an exact number in
// major units without its sign. A currency longer than any code is not read: cut as it is stored, two
// texts that differ past the cut would pass for one currency.
func (s *Source) correlationKeys(x *docIndex) []storage.CorrelationKey {
	if len(s.Correlations) == 0 || s.movedNoMoney(x) {
		// A failed refund is no refund paid: it doubles none.
		return nil
	}
	var out []storage.CorrelationKey
	for _, c := range s.Correlations {
		if c.Kind != "" && !slices.Contains(c.Kinds, x.text(c.Kind)) {
			continue
		}
		booking, amount := x.text(c.Booking), x.exactNumber(c.Amount, x.text(c.Amount))
		currency, whole := storage.CurrencyCodeWhole(x.text(c.Currency))
		if booking == "" || amount == "" || currency == "" || !whole {
			continue
		}
		amount, ok := storage.NumberText(amount)
		if !ok {
			continue // not a number: nothing to compare
		}
		if c.AmountMinorUnits {
			// Read first, then moved by the currency's exponent: "1.825e4" cents are
			// 182.50 as 18250 are. A fraction of no finite decimal is left unread.
			if amount, ok = storage.MajorUnits(amount, currency, s.CurrencyExponents); !ok {
				continue
			}
			if amount, ok = storage.NumberText(amount); !ok {
				continue
			}
		}
		// Without its sign: one source reports a refund as money going out (-182.50),
		// another as a refund of 182.50, and the two are one refund paid twice. The
		// kinds a rule reads keep a charge from passing for its refund.
		amount = strings.TrimPrefix(amount, "-")
		var buf [96]byte // on the stack: the array is hashed, never kept
		obj := append(buf[:0], '[')
		obj = appendPointerJSON(obj, booking)
		obj = append(obj, ',')
		obj = appendPointerJSON(obj, amount)
		obj = append(obj, ',')
		obj = appendPointerJSON(obj, currency)
		obj = append(obj, ']')
		if !plainJSONString(booking) || !plainJSONString(currency) {
			v, err := canonicalize(bytes.Clone(obj)) // a copy, as in businessKey
			if err != nil {
				continue
			}
			obj = v
		}
		out = append(out, storage.CorrelationKey{Rule: c.Rule, Hash: keySHA256Hex(obj), Window: c.Window})
	}
	return out
}

// claimOptions is how the source's deliveries are claimed.
func (s *Source) claimOptions() storage.ClaimOptions {
	opt := storage.ClaimOptions{TTL: s.TTL, Dispatch: s.ForwardURL != ""}
	if len(s.BusinessKey) > 0 {
		opt.BusinessWindow = cmp.Or(s.BusinessWindow, DefaultBusinessWindow)
		opt.BusinessBlocks = s.BusinessKeyBlocks
	}
	return opt
}

// claimOptions is how src's deliveries are claimed on this replica: also queued for
// dispatch, though src has no forward_url here, while another replica forwards it.
func (rc *Receiver) claimOptions(src *Source) storage.ClaimOptions {
	opt := src.claimOptions()
	if !opt.Dispatch && rc.elsewhere(src.Name) {
		opt.Dispatch = true
	}
	return opt
}

// ProbeFor describes, for a read-only lookup (WouldFlag of a storage engine), what a delivery of
// body with headers h to src would be checked for at now: its key, its business key
// and its correlation keys, and the payload hash and money a duplicate is compared on.
// For a batched source body is one item. Returns the errors Derive returns.
func ProbeFor(src *Source, h http.Header, body []byte, now time.Time) (storage.Probe, error) {
	der, doc, err := derive(src.Keys, h, body)
	if err != nil {
		return storage.Probe{}, err
	}
	opt := src.claimOptions()
	var x docIndex
	x.index(doc, body)
	amount, currency := src.money(&x)
	return storage.Probe{
		Source:         src.Name,
		Key:            der.Key,
		BusinessKey:    src.businessKey(&x),
		BusinessWindow: opt.BusinessWindow,
		BusinessBlocks: opt.BusinessBlocks,
		Correlations:   src.correlationKeys(&x),
		Now:            now,
		PayloadHash:    der.PayloadHash,
		Amount:         amount,
		Currency:       currency,
		EventStatus:    x.text(src.StatusField),
	}, nil
}
