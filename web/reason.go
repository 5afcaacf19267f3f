package web

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxReason bounds the reason of an audited change, in bytes, in every form and the API.
const maxReason = 500

// reasonProblem says what is wrong with the reason of an audited change, in words for
// the console's user, or "" when nothing is; required says whether it must be given. A
// control character other than a line break or a tab is refused: the reason is kept in
// the audit log for good, shown and exported as it is, and a NUL is text that
// PostgreSQL cannot hold.
func reasonProblem(reason string, required bool) string {
	switch {
	case reason == "" && required:
		return "Give a reason: it goes to the audit log."
	case len(reason) > maxReason:
		return fmt.Sprintf("Keep the reason under %d characters.", maxReason)
	}
	if i := strings.IndexFunc(reason, func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(reason[i:])
		return fmt.Sprintf("The reason holds a control character (U+%04X): write it as plain text.", r)
	}
	return ""
}

// checkReason refuses, for the API, the reason of an audited change that is missing or
// that reasonProblem refuses.
func checkReason(reason string) error {
	if reason == "" {
		return Errorf(http.StatusBadRequest, "reason is required: it goes to the audit log")
	}
	if p := reasonProblem(reason, true); p != "" {
		return Errorf(http.StatusBadRequest, "reason: %s", p)
	}
	return nil
}
