package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/web"
)

// settingOrigin says where the value of a source's setting came from.
type settingOrigin int

const (
	fromTable   settingOrigin = iota // the [[source]] table
	fromPreset                       // the preset its provider names
	fromDefault                      // hookdedup's default, or the scheme's
)

// shownSetting is one effective setting of a source, as `hookdedup sources` and the
// console's Sources page show it.
type shownSetting struct {
	name   string
	value  string // as the config file writes it: "840h" quoted, lists in brackets
	origin settingOrigin
	secret bool   // a secret's line: its value is masked
	note   string // where a secret comes from
}

// maskedSecret describes one secret of a source without its value.
type maskedSecret struct {
	masked, origin string
	// generated: made on first start and kept in the database, so an admin may reveal
	// it in the console.
	generated bool
}

const secretMask = "••••••••••••"

// maskedSecrets describes where the secrets of table sc come from, masked: nothing
// that shows a source never holds a configured secret's value.
func maskedSecrets(sc sourceConfig) []maskedSecret {
	var out []maskedSecret
	for i := range sc.Secret {
		origin := "in the configuration file"
		if len(sc.Secret) > 1 {
			origin += map[bool]string{true: " (signs; the others still verify)", false: " (still verifies: rotation)"}[i == 0]
		}
		out = append(out, maskedSecret{masked: secretMask, origin: origin})
	}
	if sc.SecretEnv != "" {
		out = append(out, maskedSecret{masked: secretMask, origin: "from environment variable " + sc.SecretEnv})
	}
	if sc.generated && len(sc.Secret) == 0 && sc.SecretEnv == "" {
		out = append(out, maskedSecret{masked: "whsec_" + secretMask,
			origin: "generated on first start, kept in the database", generated: true})
	}
	return out
}

// describeSource lists the effective settings of src, built from the table sc: every
// setting the source runs with, the preset's and the defaults included, each with
// where it came from. Settings of other schemes are left out, and so are the dispatch
// settings of a source that forwards nothing.
func describeSource(sc sourceConfig, src receiver.Source) ([]shownSetting, error) {
	s, err := sc.settle()
	if err != nil {
		return nil, err
	}
	var out []shownSetting
	add := func(name string, inTable bool, value string) {
		origin := fromDefault
		switch {
		case slices.Contains(s.fromPreset, name):
			origin = fromPreset
		case inTable:
			origin = fromTable
		}
		out = append(out, shownSetting{name: name, value: value, origin: origin})
	}
	str := strconv.Quote

	add("name", true, str(src.Name))
	if sc.Provider != "" {
		add("provider", true, str(sc.Provider))
	}
	scheme := src.Verifier.Scheme()
	add("signature", sc.Signature != "", str(scheme))
	switch scheme {
	case "hmac-sha256":
		add("signature_header", sc.SignatureHeader != "", str(s.SignatureHeader))
		add("signature_encoding", sc.SignatureEncoding != "", str(cmp.Or(s.SignatureEncoding, "hex")))
		if s.SignaturePrefix != "" {
			add("signature_prefix", sc.SignaturePrefix != "", str(s.SignaturePrefix))
		}
	case "basic-auth":
		add("basic_user", sc.BasicUser != "", str(s.BasicUser))
	case "token":
		if s.TokenHeader != "" {
			add("token_header", sc.TokenHeader != "", str(s.TokenHeader))
		} else {
			add("token_query", sc.TokenQuery != "", str(s.TokenQuery))
		}
	}
	if src.Verifier.Timestamped() {
		add("tolerance", sc.Tolerance != nil, str(durationText(cmp.Or(s.tolerance(), signature.DefaultTolerance))))
	}
	// Secrets masked: the table's as one setting (a list during a rotation), the
	// variable's by its name, which is no secret.
	switch n := len(sc.Secret); {
	case n == 1:
		out = append(out, shownSetting{name: "secret", value: str(secretMask), secret: true, note: "in the configuration file"})
	case n > 1:
		out = append(out, shownSetting{name: "secret", value: tomlList(slices.Repeat([]string{secretMask}, n)), secret: true,
			note: "in the configuration file; the first signs, the others still verify"})
	}
	if sc.SecretEnv != "" {
		out = append(out, shownSetting{name: "secret_env", value: str(sc.SecretEnv), secret: true, note: "its value is not shown"})
	}
	if sc.generated && len(sc.Secret) == 0 && sc.SecretEnv == "" {
		out = append(out, shownSetting{name: "secret", value: str("whsec_" + secretMask), secret: true, origin: fromDefault,
			note: "generated on first start, kept in the database"})
	}
	if len(src.Keys.EventID) > 1 {
		add("event_id", sc.EventID != nil, tomlList(src.Keys.EventID))
	} else {
		add("event_id", sc.EventID != nil, str(src.Keys.EventIDText()))
	}
	add("key_fields", sc.KeyFields != nil, tomlList(src.Keys.KeyFields))
	add("batch", sc.Batch != nil, str(src.Batch))
	if src.Batch != "" {
		add("item", sc.Item != nil, str(src.Item))
		add("max_batch_items", sc.MaxBatchItems != 0, strconv.Itoa(cmp.Or(src.MaxBatchItems, receiver.DefaultMaxBatchItems)))
	}
	add("ttl", sc.TTL != nil, str(durationText(src.TTL)))
	add("forward_url", sc.ForwardURL != "", str(web.RedactURL(src.ForwardURL)))
	if src.ForwardURL != "" {
		add("max_attempts", sc.MaxAttempts != nil, strconv.Itoa(src.MaxAttempts))
		add("attempt_timeout", sc.AttemptTimeout != nil, str(durationText(src.AttemptTimeout)))
		add("max_backoff", sc.MaxBackoff != nil, str(durationText(src.MaxBackoff)))
	}
	add("property_field", sc.PropertyField != nil, str(src.PropertyField))
	add("booking_field", sc.BookingField != nil, str(src.BookingField))
	add("status_field", sc.StatusField != nil, str(src.StatusField))
	if len(src.AmountField) > 1 {
		add("amount_field", sc.AmountField != nil, tomlList(src.AmountField))
	} else {
		add("amount_field", sc.AmountField != nil, str(strings.Join(src.AmountField, "")))
	}
	if len(src.AmountField) > 0 {
		add("currency_field", sc.CurrencyField != nil, str(src.CurrencyField))
		add("amount_minor_units", sc.AmountMinorUnits != nil, strconv.FormatBool(src.AmountMinorUnits))
	}
	if len(src.NoMoney) > 0 {
		add("no_money", sc.NoMoney != nil, tomlList(src.NoMoney))
	}
	if len(src.BusinessKey) > 0 {
		add("business_key", sc.BusinessKey != nil, tomlList(src.BusinessKey))
		add("business_window", sc.BusinessWindow != nil, str(durationText(src.BusinessWindow)))
		add("business_key_blocks", sc.BusinessKeyBlocks != nil, strconv.FormatBool(src.BusinessKeyBlocks))
	}
	add("answer", sc.Answer != "", str(string(cmp.Or(src.Answer, receiver.AnswerJSON))))
	add("form_encoded", sc.FormEncoded != nil, strconv.FormatBool(src.FormEncoded))
	return out, nil
}

// tomlList writes a list of strings as TOML does.
func tomlList(items []string) string {
	quoted := make([]string, len(items))
	for i, it := range items {
		quoted[i] = strconv.Quote(it)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// comment is what `hookdedup sources` writes after a setting: where it came from.
func (s shownSetting) comment(providerName string) string {
	switch {
	case s.secret:
		return s.note
	case s.origin == fromPreset:
		return "from provider " + providerName
	case s.origin == fromDefault:
		return "default"
	}
	return ""
}

// runSources prints each configured source's effective settings, as a [[source]]
// table, saying which came from its provider's preset and which are defaults. Secrets
// are masked.
func runSources(ctx context.Context, args []string, e env) error {
	flags := newFlags("sources", e)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem("sources", nil, pos, false); p != "" {
		return errors.New(p + "\nusage: hookdedup sources [--config F]")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	sources, db, err := existingSources(ctx, cfg, e, false)
	if err != nil {
		return err
	}
	if db != nil {
		db.Close()
	}
	var out strings.Builder
	for i, src := range sources {
		sc := cfg.Sources[i]
		shown, err := describeSource(sc, src)
		if err != nil {
			return err
		}
		if i > 0 {
			out.WriteString("\n")
		}
		head := "POST /webhooks/" + src.Name
		if p, ok := provider.Lookup(sc.Provider); ok {
			head += ", preset for " + p.Title
		}
		writeTable(&out, head, shown, sc.Provider)
	}
	// Saved to a file on a full disk, the settings cut short would read as all there is.
	if _, err := io.WriteString(e.stdout, out.String()); err != nil {
		return fmt.Errorf("print the sources: %w", err)
	}
	return nil
}

// writeTable writes one source's settings as a [[source]] table, its comments lined
// up. Widths count characters, not bytes: a masked secret is made of "•".
func writeTable(w io.Writer, head string, shown []shownSetting, providerName string) {
	nameW, valueW := 0, 0
	for _, s := range shown {
		nameW = max(nameW, len(s.name))
		valueW = max(valueW, utf8.RuneCountInString(s.value))
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s))) }
	fmt.Fprintf(w, "%s # %s\n", pad("[[source]]", nameW+3+valueW), head)
	for _, s := range shown {
		line := pad(s.name, nameW) + " = " + s.value
		if c := s.comment(providerName); c != "" {
			line = pad(line, nameW+3+valueW) + " # " + c
		}
		fmt.Fprintln(w, line)
	}
}
