package storage

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID            int64
	At            time.Time
	Actor, Action string
	Source, Key   string
	Reason        string
	PreviousState string
	// Hash is the row's link in the audit chain (auditchain.go): 64 lowercase hex
	// digits. The log sets it; it is ignored when appending.
	Hash string
}

// MaxReason bounds the reason of an audited change, in characters, wherever one is
// asked: the console's forms (their maxlength), the API and the command line.
const MaxReason = 500

// ReasonProblem says, in a sentence for whoever typed it, what is wrong with the reason
// of an audited change, or "" when nothing is (textProblem). Whether a reason must be
// given is the caller's to say.
func ReasonProblem(reason string) string { return textProblem("reason", reason, MaxReason, true) }

// textProblem says, in a sentence for whoever typed it, what is wrong with text named
// what that is kept for good and shown, or "" when nothing is. Its length is counted in
// characters, as a form's maxlength counts them, not in bytes, which would refuse
// accented or Japanese text the form let through. A control character is refused, but
// for line breaks and tabs in lines of text (lines): the text is kept in the audit log,
// shown and exported as it is (an escape sequence would act on a terminal), and a NUL
// is text PostgreSQL cannot hold.
func textProblem(what, s string, max int, lines bool) string {
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Sprintf("Keep the %s to %d characters at most (it has %d).", what, max, n)
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(lines && (r == '\n' || r == '\r' || r == '\t'))
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Sprintf("The %s holds a control character (U+%04X): write it as plain text.", what, r)
	}
	return ""
}

// ReplacedText is s as both engines keep free text from outside that is not a
// delivery's (a reason, an actor, a token's name, a throttle's scope, an error a
// downstream sent back): each NUL byte and each byte that is not part of valid UTF-8
// becomes U+FFFD. PostgreSQL's text holds neither, and an audit row must hash alike on
// both engines, so that migrate can copy it.
func ReplacedText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}
