package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
)

// PostgreSQL's text holds valid UTF-8 without NUL bytes and refuses anything else with
// an error, where SQLite stores any bytes. A delivery's fields come from outside (a
// payload's JSON, which may spell a NUL as \u0000; a header, which may carry bytes that
// are not UTF-8), and a delivery must never fail to be stored for one of them: the
// fields that only describe a delivery are stored escaped (textSafe), its body is
// bytea and keeps every byte, and its headers are JSON text, which escapes a NUL and
// so keeps it. Only the source and key of a claim, its identity, are never escaped:
// two keys that an escape made equal would make one event a duplicate of another.
// Such a key is refused before it is queued (claimKeyProblem); the receiver refuses it
// earlier still, as an event id with a control character or bytes that are not UTF-8.

// textOK reports whether a text column holds each of ss as it is. A name that it
// cannot hold was never stored, so a lookup of it finds nothing; sent as a parameter
// it would fail the query instead.
func textOK(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// textSafe is s as a text column can hold it: s itself when it can, otherwise s with
// each NUL byte and each byte that is not part of valid UTF-8 written as \xNN, the
// way Go quotes a byte, so that a reader sees what was sent.
func textSafe(s string) string {
	if textOK(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || (r == utf8.RuneError && size == 1) {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// claimKeyProblem says why a text column cannot hold what, the source or key of a
// claim, as it is, or returns "".
func claimKeyProblem(what, s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Sprintf("%s %q holds a NUL byte, which PostgreSQL cannot store in text", what, s)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%s %q is not valid UTF-8, which PostgreSQL cannot store in text", what, s)
	}
	return ""
}

// storable is d as its text columns can hold it: d itself, as almost always, or a
// copy with the fields that cannot be held as they are escaped (textSafe). The
// forensic checks read the copy, so that what they compare is what is stored.
func storable(d *storage.Delivery) *storage.Delivery {
	ok := true
	for _, f := range textFields(d) {
		ok = ok && textOK(*f)
	}
	for _, c := range d.Correlations {
		ok = ok && textOK(c.Rule) && textOK(c.Hash)
	}
	if ok {
		return d
	}
	c := *d
	for _, f := range textFields(&c) {
		*f = textSafe(*f)
	}
	if len(d.Correlations) > 0 {
		c.Correlations = make([]storage.CorrelationKey, len(d.Correlations))
		for i, k := range d.Correlations {
			k.Rule, k.Hash = textSafe(k.Rule), textSafe(k.Hash)
			c.Correlations[i] = k
		}
	}
	return &c
}

// textFields are d's fields that text columns hold. (Its headers are held as JSON.)
func textFields(d *storage.Delivery) [16]*string {
	return [...]*string{&d.Source, &d.Key, &d.Error, &d.KeyMethod, &d.KeyFrom, &d.KeyCanonical,
		&d.PayloadHash, &d.Property, &d.Booking, &d.EventStatus, &d.Amount, &d.Currency, &d.RemoteAddr,
		&d.ContentType, &d.BusinessKey, &d.BatchEnvelope}
}
