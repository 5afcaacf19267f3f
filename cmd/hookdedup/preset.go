package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hookdedup/hookdedup/receiver/provider"
)

// withPreset returns sc with every setting it leaves unset taken from the preset its
// provider names, and the names of the settings the preset filled, as the config file
// names them. A table without provider is returned as it is.
func (sc sourceConfig) withPreset() (sourceConfig, []string, error) {
	if sc.Provider == "" {
		return sc, nil, nil
	}
	p, err := provider.Resolve(sc.Provider)
	if err != nil {
		return sc, nil, fmt.Errorf("provider: %w", err)
	}
	// The table's settings as the preset reads them: nil where the table is silent.
	set := provider.Settings{
		Signature:         nonEmpty(sc.Signature),
		SignatureHeader:   nonEmpty(sc.SignatureHeader),
		SignatureEncoding: nonEmpty(sc.SignatureEncoding),
		SignaturePrefix:   nonEmpty(sc.SignaturePrefix),
		BasicUser:         nonEmpty(sc.BasicUser),
		TokenHeader:       nonEmpty(sc.TokenHeader),
		TokenQuery:        nonEmpty(sc.TokenQuery),
		EventID:           sc.EventID,
		Batch:             sc.Batch,
		Item:              sc.Item,
		PropertyField:     sc.PropertyField,
		BookingField:      sc.BookingField,
		StatusField:       sc.StatusField,
		AmountField:       sc.AmountField,
		CurrencyField:     sc.CurrencyField,
		AmountMinorUnits:  sc.AmountMinorUnits,
	}
	if sc.KeyFields != nil {
		set.KeyFields = &sc.KeyFields
	}
	if sc.BusinessKey != nil {
		set.BusinessKey = &sc.BusinessKey
	}
	if sc.NoMoney != nil {
		set.NoMoney = &sc.NoMoney
	}
	if sc.TTL != nil {
		set.TTL = new(durationText(*sc.TTL))
	}
	filled := p.Apply(&set)

	sc.Signature = deref(set.Signature)
	sc.SignatureHeader = deref(set.SignatureHeader)
	sc.SignatureEncoding = deref(set.SignatureEncoding)
	sc.SignaturePrefix = deref(set.SignaturePrefix)
	sc.BasicUser = deref(set.BasicUser)
	sc.TokenHeader = deref(set.TokenHeader)
	sc.TokenQuery = deref(set.TokenQuery)
	sc.EventID = set.EventID
	if set.KeyFields != nil {
		sc.KeyFields = slices.Clone(*set.KeyFields)
	}
	if set.BusinessKey != nil {
		sc.BusinessKey = slices.Clone(*set.BusinessKey)
	}
	if set.NoMoney != nil {
		sc.NoMoney = slices.Clone(*set.NoMoney)
	}
	sc.Batch, sc.Item = set.Batch, set.Item
	sc.PropertyField, sc.BookingField, sc.StatusField = set.PropertyField, set.BookingField, set.StatusField
	sc.AmountField, sc.CurrencyField, sc.AmountMinorUnits = set.AmountField, set.CurrencyField, set.AmountMinorUnits
	if slices.Contains(filled, "ttl") {
		ttl, err := time.ParseDuration(*set.TTL)
		if err != nil { // the preset table's own ttl: its tests parse every one
			return sc, nil, fmt.Errorf("provider %s: ttl %q: %w", p.Name, *set.TTL, err)
		}
		sc.TTL = &ttl
	}
	// What the preset knows beyond Settings: the answer its sender expects, and
	// whether it may post a form.
	if sc.Answer == "" {
		sc.Answer = string(p.Answer)
		filled = append(filled, "answer")
	}
	if sc.FormEncoded == nil && p.FormEncoded {
		sc.FormEncoded = new(true)
		filled = append(filled, "form_encoded")
	}
	return sc, filled, nil
}

// nonEmpty is s as a setting the preset reads: nil when the table leaves it "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// durationText writes d as a config file would ("840h", "5m", "90s"), rather than
// time.Duration's "840h0m0s".
func durationText(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
