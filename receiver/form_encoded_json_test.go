package receiver_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestHandler_FormEncodedTakesJSONUnderFormType: a source with form_encoded (GitHub's
// preset) takes a JSON body sent under a form's Content-Type (curl -d sends one) as JSON,
// as a source without it does: no form GitHub sends begins with '{' or '[', and reading
// one as a form found no payload field in it, refusing what a source without
// form_encoded takes.
func TestHandler_FormEncodedTakesJSONUnderFormType(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, githubSource(t, true))
	const event = `{"action":"opened","issue":{"number":1347}}`
	for i, body := range []string{event, "\n  " + event} {
		code, _, got := rawPost(t, e, "github", githubHeaders(body, "application/x-www-form-urlencoded", "d-json-"+string(rune('a'+i))), body)
		if code != 200 || !strings.Contains(got, `"status":"accepted"`) {
			t.Fatalf("JSON body %q under a form's Content-Type: %d %s; want it accepted", body, code, got)
		}
		if d := stored(t, e, got); string(d.Body) != body || d.EventStatus != "opened" {
			t.Errorf("stored body %q labelled %q; want the body as sent, labelled from its JSON", d.Body, d.EventStatus)
		}
	}
	// Refused for what is wrong in it, not for a missing payload field.
	bad := `{"action":`
	code, _, got := rawPost(t, e, "github", githubHeaders(bad, "application/x-www-form-urlencoded", "d-bad"), bad)
	if code != 400 || !strings.Contains(got, "not valid JSON") || strings.Contains(got, "payload") {
		t.Errorf("invalid JSON under a form's Content-Type: %d %s; want 400 saying what is wrong in the JSON", code, got)
	}
	// A form is still read as one.
	form := "payload=" + strings.ReplaceAll(strings.ReplaceAll(event, "{", "%7B"), "}", "%7D")
	if code, _, got := rawPost(t, e, "github", githubHeaders(form, "application/x-www-form-urlencoded", "d-form"), form); code != 200 {
		t.Errorf("a form: %d %s; want it accepted", code, got)
	}
}
