// Package provider holds presets for the webhook senders hookdedup's users
// receive from: how each one signs, where its event id is or which fields
// make the key, how its batches split into events, which fields label a
// delivery in the console, how long its keys must be kept and what answer
// it expects. A source names one with provider = "NAME"; every setting the
// source sets itself overrides the preset's ([Preset.Apply]).
//
// The presets are plain data. Each names the sender documentation and
// official library files it was checked against, and says in its Note what
// that documentation leaves open. The package's tests check every preset
// against the signature schemes and the key rules, and against a delivery
// written in the sender's documented shape.
package provider

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Answer is the body a sender expects along with its 2xx.
type Answer string

const (
	// AnswerJSON is hookdedup's own JSON answer, one result per event for a
	// batch. Senders that only look at the status code get it.
	AnswerJSON Answer = "json"
	// AnswerAccepted is the literal body "[accepted]", which Adyen's
	// notification webhooks have long required; Adyen now also accepts any
	// 2xx, and the literal body satisfies both.
	AnswerAccepted Answer = "[accepted]"
)

// Preset is what hookdedup knows about one sender. Pointer fields (EventID,
// KeyFields, the labels) are RFC 6901 JSON pointers; when Batch is set they
// are read inside each event of the batch, not in the whole body.
type Preset struct {
	// Name is what `provider = "..."` names: lower case, no spaces.
	Name string
	// Title is the sender's name as its users write it.
	Title string

	// Signature is the scheme, as the `signature` setting names it; the
	// fields after it are that scheme's settings, "" when it uses none.
	Signature         string
	SignatureHeader   string
	SignatureEncoding string
	SignaturePrefix   string
	BasicUser         string
	TokenHeader       string
	TokenQuery        string

	// EventID names where the sender's event id is (none when it has none
	// usable), each place in the syntax of the event_id setting, the first that
	// holds one winning; KeyFields are the fields hashed into the key when there
	// is no event id.
	EventID   []string
	KeyFields []string

	// Batch points at the array of events in one request ("" when a
	// request is one event); Item points at the event inside each element
	// ("" for the element itself).
	Batch string
	Item  string

	// RedactFields are JSON pointers to credentials that some of the sender's
	// bodies carry: masked in what is kept of a delivery the source refuses.
	RedactFields []string

	// The console's labels for a delivery; "" where the sender has no such
	// field.
	PropertyField string
	BookingField  string
	StatusField   string
	// AmountField names where the amount is, each place in the syntax of the
	// amount_field setting, the first that holds one winning.
	AmountField   []string
	CurrencyField string
	// AmountMinorUnits reports that AmountField holds whole minor units
	// (cents), to be shown divided by the currency's exponent.
	AmountMinorUnits bool
	// CurrencyExponents are the sender's exponents where they differ from ISO
	// 4217's, by upper-case currency code: the minor units it counts in.
	CurrencyExponents map[string]int
	// BusinessKey are the fields that identify one business event (a refund
	// of an order for an amount) whatever id the sender gives the message: two
	// accepted deliveries with equal values under different keys are
	// suspected duplicates. Empty where the sender's events carry nothing that
	// tells a re-send from a legitimate repeat.
	BusinessKey []string
	// NoMoney are the conditions ("POINTER = VALUE|VALUE", the no_money setting)
	// that mark an event that moved no money: a refund that failed, a payment
	// refused. Its amount is counted nowhere, and no correlation rule reads it.
	NoMoney []string

	// TTL is the default dedup window: longer than the sender's
	// redelivery window, except for Thin senders (see Thin).
	TTL time.Duration
	// Redelivery is how long the sender's documentation says it retries an
	// event it could not deliver; 0 when the documentation gives no figure.
	Redelivery time.Duration
	// Thin reports a sender whose events carry an entity's id but nothing
	// that tells one change of the entity from the next (no event id, no
	// time), so that a redelivery and a later change look alike. Such a
	// preset keys on the whole event and keeps the TTL short: a missed
	// change is worse than a repeated one, and a retry reaches hookdedup
	// only when its answer to the first delivery was lost.
	Thin bool

	// Answer is the body the sender expects with its 2xx.
	Answer Answer
	// FormEncoded reports that the sender may post its JSON as the payload
	// field of an application/x-www-form-urlencoded body.
	FormEncoded bool

	// Docs are the sender's documentation pages and official library files
	// the preset was checked against.
	Docs []string
	// Note is shown to users beside the source: what the preset keys on,
	// the redelivery window, and what the sender's documentation leaves
	// open.
	Note string
}

// Lookup returns the preset called name, and false if there is none.
// Names are matched exactly: they are lower case.
func Lookup(name string) (Preset, bool) {
	i, ok := slices.BinarySearchFunc(presets, name, func(p Preset, name string) int {
		return strings.Compare(p.Name, name)
	})
	if !ok {
		return Preset{}, false
	}
	return clonePreset(presets[i]), true
}

// Resolve is Lookup with an error for a config reader: it names the
// unknown provider and lists the known ones.
func Resolve(name string) (Preset, error) {
	if p, ok := Lookup(name); ok {
		return p, nil
	}
	if name == "" {
		return Preset{}, fmt.Errorf("is empty (want one of %s)", strings.Join(Names(), ", "))
	}
	return Preset{}, fmt.Errorf("%q is not a known provider (want one of %s)", name, strings.Join(Names(), ", "))
}

// Names returns the names of all presets, sorted.
func Names() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
	}
	return names
}

// clonePreset copies the slices, so that a caller changing its copy
// cannot change the table.
func clonePreset(p Preset) Preset {
	p.EventID = slices.Clone(p.EventID)
	p.KeyFields = slices.Clone(p.KeyFields)
	p.AmountField = slices.Clone(p.AmountField)
	p.BusinessKey = slices.Clone(p.BusinessKey)
	p.NoMoney = slices.Clone(p.NoMoney)
	p.Docs = slices.Clone(p.Docs)
	p.RedactFields = slices.Clone(p.RedactFields)
	p.CurrencyExponents = maps.Clone(p.CurrencyExponents)
	return p
}
