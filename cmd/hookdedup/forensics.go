package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/hookdedup/hookdedup/receiver"
)

// defaultRemember is how long traces of expired keys are kept: 90 days, beyond the
// longest retries (Adyen's 30 days) and a quarter's re-sends of reservations.
const defaultRemember = 90 * 24 * time.Hour

// correlationFile is one [[correlation]] table as written.
type correlationFile struct {
	Name    string                  `toml:"name"`
	Window  any                     `toml:"window"` // read by hand: a bare number would count nanoseconds
	Sources []correlationSourceFile `toml:"source"`
}

// correlationSourceFile is one [[correlation.source]] table: where one source's events
// carry what the rule compares.
type correlationSourceFile struct {
	Name             string   `toml:"name"`
	Booking          string   `toml:"booking"`
	Amount           string   `toml:"amount"`
	Currency         string   `toml:"currency"`
	AmountMinorUnits bool     `toml:"amount_minor_units"`
	Kind             string   `toml:"kind"`
	Kinds            []string `toml:"kinds"`
}

// correlationConfig is a rule once read: each of its sources' parts, checked.
type correlationConfig struct {
	Name  string
	Parts map[string]receiver.Correlation // by source name
	Order []string                        // the sources, as the file lists them
}

// applyCorrelations reads the [[correlation]] tables. Errors name the rule and the
// setting; that each source exists is checked once the sources are built
// (attachCorrelations).
func (c *config) applyCorrelations(files []correlationFile, _ toml.MetaData) error {
	seen := map[string]bool{}
	for i, f := range files {
		label := f.Name
		if label == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		cc, err := readCorrelation(f, seen)
		if err != nil {
			return fmt.Errorf("correlation %q: %w", label, err)
		}
		seen[f.Name] = true
		c.Correlations = append(c.Correlations, cc)
	}
	return nil
}

func readCorrelation(f correlationFile, taken map[string]bool) (correlationConfig, error) {
	cc := correlationConfig{Name: f.Name, Parts: map[string]receiver.Correlation{}}
	switch {
	case f.Name == "":
		return cc, errors.New("name: is required")
	case !utf8.ValidString(f.Name) || strings.ContainsFunc(f.Name, unicode.IsControl):
		// The name is stored with every correlation key and suspect it makes, and
		// PostgreSQL text holds no NUL: stored escaped, it would never match the name
		// looked up again, and the rule would never flag.
		return cc, errors.New("name: must not hold a control character (a line break, a tab, NUL) or bytes that are not UTF-8")
	case taken[f.Name]:
		return cc, errors.New("name: is used by another correlation rule")
	}
	var window time.Duration
	switch w := f.Window.(type) {
	case nil:
		return cc, fmt.Errorf("window: is required %s", durationHint)
	case string:
		d, err := parseDuration(w)
		if err != nil {
			return cc, fmt.Errorf("window: %w", err)
		}
		window = d
	case int64:
		return cc, fmt.Errorf("window: %w", fileDuration(time.Duration(w), true))
	default:
		return cc, fmt.Errorf("window: %v is not a duration %s", w, durationHint)
	}
	if len(f.Sources) < 2 {
		return cc, errors.New("source: name at least two [[correlation.source]] tables: a rule compares events across sources")
	}
	for j, s := range f.Sources {
		if s.Name == "" {
			return cc, fmt.Errorf("source #%d: name: is required", j+1)
		}
		if _, dup := cc.Parts[s.Name]; dup {
			return cc, fmt.Errorf("source %q: is listed twice", s.Name)
		}
		part := receiver.Correlation{
			Rule: f.Name, Window: window,
			Booking: s.Booking, Amount: s.Amount, Currency: s.Currency, AmountMinorUnits: s.AmountMinorUnits,
			Kind: s.Kind, Kinds: s.Kinds,
		}
		if err := part.Check(); err != nil {
			return cc, fmt.Errorf("source %q: %w", s.Name, err)
		}
		cc.Parts[s.Name] = part
		cc.Order = append(cc.Order, s.Name)
	}
	return cc, nil
}

// attachCorrelations gives each source its parts in the rules. A rule naming a source
// that is not configured is an error naming both.
func attachCorrelations(rules []correlationConfig, sources []receiver.Source) error {
	for _, rule := range rules {
		for _, name := range rule.Order {
			i := slices.IndexFunc(sources, func(s receiver.Source) bool { return s.Name == name })
			if i < 0 {
				return fmt.Errorf("correlation %q: source %q: no [[source]] has that name", rule.Name, name)
			}
			sources[i].Correlations = append(sources[i].Correlations, rule.Parts[name])
		}
	}
	return nil
}

// longestWindows are the longest business window and correlation window configured:
// the sweeps keep business and correlation keys that long.
func longestWindows(sources []receiver.Source) (business, correlation time.Duration) {
	for _, s := range sources {
		if len(s.BusinessKey) > 0 {
			business = max(business, cmp.Or(s.BusinessWindow, receiver.DefaultBusinessWindow))
		}
		for _, c := range s.Correlations {
			correlation = max(correlation, c.Window)
		}
	}
	return business, correlation
}
