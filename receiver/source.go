package receiver

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// formContentType is the content type of an HTML form's body, which GitHub offers
// beside JSON: the JSON is then the payload field.
const formContentType = "application/x-www-form-urlencoded"

// Event returns the JSON a delivery's key and labels are read from: body itself, or,
// for a source that takes form-encoded deliveries and one sent as a form, its payload
// field. body is what was verified, and stays what is stored and forwarded. An error
// says why intake would refuse the form (400).
func (s *Source) Event(h http.Header, body []byte) ([]byte, error) {
	if !s.FormEncoded {
		return body, nil
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != formContentType || beginsAsJSON(body) {
		// A body that begins as JSON does is JSON under a form's Content-Type (curl -d
		// sends one), as for a source without form_encoded: no form GitHub sends
		// begins so, and read as a form it would be refused for a payload field it
		// never meant to have.
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errors.New("the form body could not be decoded: " + err.Error())
	}
	payload, ok := form["payload"]
	switch {
	case !ok:
		return nil, errors.New("the form body has no payload field (a form-encoded delivery carries its JSON in payload=)")
	case len(payload) > 1:
		return nil, errors.New("the form body has " + strconv.Itoa(len(payload)) + " payload fields; want one")
	}
	return []byte(payload[0]), nil
}

// notJSONHint says, of a delivery refused as not JSON (err wraps ErrNotJSON), what its
// Content-Type tells of why, as the parser's own words ("invalid character 'p' at start of
// value", "invalid UTF-8 at byte 83") would not say why a whole sender's deliveries are
// refused: a form sent to a source that takes none (formHint), or a body, not UTF-8, in
// the charset the Content-Type declares (charsetHint). "" for any other refusal or
// delivery.
func (s *Source) notJSONHint(h http.Header, body []byte, err error) string {
	if !errors.Is(err, ErrNotJSON) {
		return ""
	}
	mt, params, perr := mime.ParseMediaType(h.Get("Content-Type"))
	if perr != nil {
		return ""
	}
	if mt == formContentType && !s.FormEncoded {
		// A body that begins as JSON does is JSON under a form's Content-Type (curl -d
		// sends one), refused for what is wrong in it, which the hint would hide.
		if beginsAsJSON(body) {
			return ""
		}
		return s.formHint()
	}
	return charsetHint(params["charset"], body)
}

// beginsAsJSON reports whether body, after JSON's whitespace, begins as a JSON object
// or array does: taken for JSON under a form's Content-Type, as no form a sender of
// forms sends (GitHub's payload=) begins so. A byte-order mark before it is passed
// over: JSON written by an encoder that adds one, which the JSON check refuses for it.
func beginsAsJSON(body []byte) bool {
	t := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\ufeff")), " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// charsetHint names charset, the one a Content-Type declares, for a body that is not
// UTF-8, unless it is UTF-8's own name: a sender whose encoder writes ISO-8859-1 or
// windows-1252 is told so, not only that its bytes are not UTF-8.
func charsetHint(charset string, body []byte) string {
	if charset == "" || strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "utf8") || utf8.Valid(body) {
		return ""
	}
	return " (the body is declared charset=" + safeName(strings.ToLower(charset), maxSourceName) + "; hookdedup takes UTF-8 JSON)"
}

// formHint says, of a form refused as not JSON by a source that takes no form, which
// setting takes one: GitHub offers the form content type.
func (s *Source) formHint() string {
	if s.Batch != "" {
		return " (the Content-Type is " + formContentType + ": a batched source takes a JSON body; have the sender send application/json)"
	}
	return " (the Content-Type is " + formContentType + ": set form_encoded = true to take a form with the JSON in its payload field, " +
		"as GitHub sends it, or have the sender send application/json)"
}

// MessageIDProblem returns the error intake's signature check gives a delivery with
// headers h before it reads any secret, nil when there is none: a scheme that signs the
// message id (standard-webhooks) refuses a delivery without one, which is then never
// keyed, whatever its key fields. The key command says so as intake would; the key
// lab, which checks no signature, leaves it out as it leaves the signature out.
func (s *Source) MessageIDProblem(h http.Header) error {
	ids, ok := s.Verifier.(signature.IDSigner)
	if !ok {
		return nil
	}
	if err := ids.CheckID(h); err != nil {
		return fmt.Errorf("intake would answer 401 and key nothing: signature: %w (%s signs the message id)", err, s.Verifier.Scheme())
	}
	return nil
}

// Events returns the JSON events intake keys in a delivery of body, each on its own: the
// items of a batched source's batch (SplitBatch), or the delivery's one event (Event).
// An error is intake's refusal of the body before any event is keyed: a batch that
// cannot be taken apart, or a form without its payload field. Signatures are not
// checked.
func (s *Source) Events(h http.Header, body []byte) ([][]byte, error) {
	if s.Batch != "" {
		items, _, err := SplitBatch(body, s.Batch, s.Item, s.MaxBatchItems)
		return items, err
	}
	event, err := s.Event(h, body)
	if err != nil {
		return nil, err
	}
	return [][]byte{event}, nil
}

// money returns the amount and currency of the event that x indexes (canonical JSON) as
// stored: the amount in major units, the currency in upper case.
func (s *Source) money(x *docIndex) (amount, currency string) {
	amount = s.amountText(x)
	if amount == "" {
		return "", ""
	}
	currency = storage.CurrencyCode(x.text(s.CurrencyField))
	if s.movedNoMoney(x) {
		// The currency stays, so that the event is counted under its currency with no
		// amount. (One that names no amount at all is stored with neither: the
		// currency alone says nothing of money.)
		return "", currency
	}
	if s.AmountMinorUnits {
		amount, _ = storage.MajorUnits(amount, currency, s.CurrencyExponents) // not a plain number: kept as sent
	}
	return amount, currency
}

// movedNoMoney reports whether the event x indexes meets one of the source's no_money
// conditions: a failed or refused refund, charge or capture, whose amount was never paid
// out or taken. Every figure of money (the ledger, the dashboard, suspects' money at
// stake) reads the stored amount, so this is the one place that keeps it out of them.
func (s *Source) movedNoMoney(x *docIndex) bool {
	for _, cond := range s.NoMoney {
		at, list, _ := storage.CutCondition(cond)
		if storage.PlaceListHas(list, x.text(at)) {
			return true
		}
	}
	return false
}

// amountText is the amount of the event x indexes as sent: the value at the first of
// AmountField's places that applies to the event and holds one; "" for none.
func (s *Source) amountText(x *docIndex) string {
	for _, place := range s.AmountField {
		from, when, list, qualified := storage.CutPlace(place)
		if qualified && !storage.PlaceListHas(list, x.text(when)) {
			continue
		}
		if v := x.text(from); v != "" {
			return x.exactNumber(from, v)
		}
	}
	return ""
}

// delivery is what intake stores of one event that has its key: the key and how it was
// derived, the labels and the money read from doc, and body (the bytes as sent, which are
// stored); event is the JSON that doc canonicalises, as sent, for the digits that doc
// rounds. For a single delivery and for each item of a batch alike. Its headers are the caller's
// to set: a batch stores them once. It is a value, so that a batch fills its slice of
// deliveries in place rather than allocating each item and copying it.
func (s *Source) delivery(r *http.Request, der storage.Derivation, doc string, event, body []byte) storage.Delivery {
	// Indexed once: the labels, the money and the forensic keys each read the event.
	var x docIndex
	x.index(doc, event)
	amount, currency := s.money(&x)
	return storage.Delivery{
		Source:       s.Name,
		Status:       http.StatusOK, // accepted or duplicate, the answer is 200 once stored
		Key:          der.Key,
		KeyMethod:    der.Method,
		KeyFrom:      der.EventIDFrom,
		KeyCanonical: der.Canonical,
		PayloadHash:  der.PayloadHash,
		Property:     x.text(s.PropertyField),
		Booking:      x.text(s.BookingField),
		EventStatus:  x.text(s.StatusField),
		Amount:       amount,
		Currency:     currency,
		RemoteAddr:   r.RemoteAddr,
		ContentType:  r.Header.Get("Content-Type"),
		Body:         body,
		BusinessKey:  s.businessKey(&x),
		Correlations: s.correlationKeys(&x),
	}
}

// writeStored answers a stored delivery, accepted or duplicate, the way its source's
// sender expects: hookdedup's JSON, or Adyen's literal "[accepted]".
func writeStored(w http.ResponseWriter, src *Source, a answer) {
	if src.Answer != AnswerAccepted {
		writeJSON(w, http.StatusOK, a)
		return
	}
	writeAccepted(w)
}

// writeAccepted is Adyen's answer to a notification it need not send again: the text
// "[accepted]", for a single delivery and for a batch alike.
func writeAccepted(w http.ResponseWriter) {
	const body = "[accepted]"
	answerHeaders(w.Header(), "text/plain; charset=utf-8", len(body))
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(body))
}
