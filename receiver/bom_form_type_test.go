package receiver_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestHandler_BOMJSONUnderFormType: JSON that starts with a byte-order mark, sent under a
// form's Content-Type, is refused for the mark, on a source with form_encoded and on one
// without: not for a payload field it never meant to have, nor with advice to set
// form_encoded, which would refuse it the same.
func TestHandler_BOMJSONUnderFormType(t *testing.T) {
	const body = "\ufeff" + `{"action":"opened"}`
	for _, form := range []bool{true, false} {
		e := newEnv(t, sqlite.Options{}, githubSource(t, form))
		code, _, got := rawPost(t, e, "github", githubHeaders(body, "application/x-www-form-urlencoded", "d-bom"), body)
		if code != 400 || !strings.Contains(got, "byte-order mark") || strings.Contains(got, "payload") || strings.Contains(got, "form_encoded") {
			t.Errorf("form_encoded %v: %d %s; want 400 naming the byte-order mark alone", form, code, got)
		}
	}
}
