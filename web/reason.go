package web

import (
	"net/http"

	"github.com/hookdedup/hookdedup/storage"
)

// reasonProblem says what is wrong with the reason of an audited change, in words for
// the console's user, or "" when nothing is; required says whether it must be given.
// What a reason may hold is storage.ReasonProblem's.
func reasonProblem(reason string, required bool) string {
	if reason == "" && required {
		return "Give a reason: it goes to the audit log."
	}
	return storage.ReasonProblem(reason)
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
