package provider

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Settings are the source settings a preset can supply, tagged with their
// names in the config file. A nil field is unset; a field set to anything,
// even "" or an empty list, is the source's own choice, which Apply never
// overrides. The shape lets a config reader embed Settings in its
// [[source]] table, so that a TOML decoder leaves exactly the keys the file
// does not mention nil.
type Settings struct {
	Signature         *string   `toml:"signature"`
	SignatureHeader   *string   `toml:"signature_header"`
	SignatureEncoding *string   `toml:"signature_encoding"`
	SignaturePrefix   *string   `toml:"signature_prefix"`
	BasicUser         *string   `toml:"basic_user"`
	TokenHeader       *string   `toml:"token_header"`
	TokenQuery        *string   `toml:"token_query"`
	EventID           *EventIDs `toml:"event_id"`
	KeyFields         *[]string `toml:"key_fields"`
	Batch             *string   `toml:"batch"`
	Item              *string   `toml:"item"`
	PropertyField     *string   `toml:"property_field"`
	BookingField      *string   `toml:"booking_field"`
	StatusField       *string   `toml:"status_field"`
	AmountField       *Places   `toml:"amount_field"`
	CurrencyField     *string   `toml:"currency_field"`
	AmountMinorUnits  *bool     `toml:"amount_minor_units"`
	TTL               *string   `toml:"ttl"` // a Go duration, as the ttl setting is written
	BusinessKey       *[]string `toml:"business_key"`
	NoMoney           *[]string `toml:"no_money"`
}

// EventIDs is the event_id setting: where an event id is, one place or several, the first
// that holds one winning. The file writes one place as a string and several as an array
// of strings; "" and [] say none.
type EventIDs []string

// UnmarshalTOML reads a string or an array of strings.
func (e *EventIDs) UnmarshalTOML(v any) error {
	places, err := readPlaces("event_id", v)
	*e = places
	return err
}

// Places is a setting that names one place or several, such as amount_field, the first
// that holds a value winning: the file writes one as a string and several as an array
// of strings; "" and [] say none.
type Places []string

// UnmarshalTOML reads a string or an array of strings.
func (p *Places) UnmarshalTOML(v any) error {
	places, err := readPlaces("amount_field", v)
	*p = places
	return err
}

// readPlaces reads the TOML value v of setting, one place or several: a string, or an
// array of strings; "" and [] give none.
func readPlaces(setting string, v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return []string{}, nil
		}
		return []string{v}, nil
	case []any:
		places := make([]string, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s[%d] is %s, not a string", setting, i, tomlKind(x))
			}
			places[i] = s
		}
		return places, nil
	}
	return nil, fmt.Errorf("%s is %s: write a string, or an array of strings for several places", setting, tomlKind(v))
}

// tomlKind names the kind of a TOML value as a reader of the file would.
func tomlKind(v any) string {
	switch v.(type) {
	case int64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	}
	return "a date or time"
}

// Apply fills each unset field of s from the preset and returns the config
// names of the fields it filled, in the order of Settings, so that the
// console and `hookdedup sources` can show which settings came from the
// preset. The preset's Answer, FormEncoded, Thin, Docs and Note are not
// settings; a caller reads them from the Preset.
//
// A preset fills what it has a value for, except that:
//
//   - event_id, property_field, booking_field and status_field are always
//     filled when unset, with "" where the sender has none, so that defaults
//     meant for other senders (a scheme's default event id, "/property_id")
//     do not apply to this one.
//   - The scheme's settings (signature_header … token_query) are filled
//     only when the source keeps the preset's scheme: a source that sets
//     signature to another scheme sets that scheme's settings itself.
//   - token_header and token_query are filled only when the source sets
//     neither, since a scheme takes exactly one of them.
//   - item is filled only when the source does not set batch itself.
//
// Example: a config reader whose [[source]] table embeds Settings calls it
// between decoding the file and checking the values.
//
//	type sourceConfig struct {
//		Name     string `toml:"name"`
//		Provider string `toml:"provider"`
//		provider.Settings
//		// … settings no preset supplies (secret, forward_url, …)
//	}
//
//	var fromPreset []string
//	if sc.Provider != "" {
//		p, err := provider.Resolve(sc.Provider)
//		if err != nil {
//			return fail("provider", err)
//		}
//		fromPreset = p.Apply(&sc.Settings)
//	}
//	// From here on, read sc.Signature, sc.EventID, … as if the file had
//	// set them; the nil ones keep hookdedup's generic defaults.
func (p Preset) Apply(s *Settings) []string {
	var filled []string
	str := func(name string, dst **string, v string, always bool) {
		if *dst == nil && (v != "" || always) {
			*dst = &v
			filled = append(filled, name)
		}
	}

	str("signature", &s.Signature, p.Signature, false)
	if s.Signature == nil || *s.Signature == p.Signature {
		str("signature_header", &s.SignatureHeader, p.SignatureHeader, false)
		str("signature_encoding", &s.SignatureEncoding, p.SignatureEncoding, false)
		str("signature_prefix", &s.SignaturePrefix, p.SignaturePrefix, false)
		str("basic_user", &s.BasicUser, p.BasicUser, false)
		if s.TokenHeader == nil && s.TokenQuery == nil {
			str("token_header", &s.TokenHeader, p.TokenHeader, false)
			str("token_query", &s.TokenQuery, p.TokenQuery, false)
		}
	}
	if s.EventID == nil {
		ids := EventIDs(slices.Clone(p.EventID))
		s.EventID = &ids
		filled = append(filled, "event_id")
	}
	if s.KeyFields == nil && len(p.KeyFields) > 0 {
		fields := slices.Clone(p.KeyFields)
		s.KeyFields = &fields
		filled = append(filled, "key_fields")
	}
	// The item pointer belongs to the preset's batch: a table that sets its own batch
	// sets its own item, but one that repeats the preset's batch still needs its item
	// (Adyen's signed fields are inside it).
	ownBatch := s.Batch != nil && *s.Batch != p.Batch
	str("batch", &s.Batch, p.Batch, false)
	if !ownBatch {
		str("item", &s.Item, p.Item, false)
	}
	str("property_field", &s.PropertyField, p.PropertyField, true)
	str("booking_field", &s.BookingField, p.BookingField, true)
	str("status_field", &s.StatusField, p.StatusField, true)
	if s.AmountField == nil && len(p.AmountField) > 0 {
		places := Places(slices.Clone(p.AmountField))
		s.AmountField = &places
		filled = append(filled, "amount_field")
	}
	str("currency_field", &s.CurrencyField, p.CurrencyField, false)
	if s.AmountMinorUnits == nil && len(p.AmountField) > 0 {
		minor := p.AmountMinorUnits
		s.AmountMinorUnits = &minor
		filled = append(filled, "amount_minor_units")
	}
	if p.TTL > 0 {
		str("ttl", &s.TTL, formatDuration(p.TTL), false)
	}
	if s.BusinessKey == nil && len(p.BusinessKey) > 0 {
		fields := slices.Clone(p.BusinessKey)
		s.BusinessKey = &fields
		filled = append(filled, "business_key")
	}
	if s.NoMoney == nil && len(p.NoMoney) > 0 {
		conds := slices.Clone(p.NoMoney)
		s.NoMoney = &conds
		filled = append(filled, "no_money")
	}
	return filled
}

// formatDuration writes d as a user would in the config ("840h", "5m"),
// rather than time.Duration's "840h0m0s".
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
