package web_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
)

// TestReason_MultibyteUnderFiveHundredCharacters: the reason's bound is 500 characters,
// as the console's inputs (maxlength, counted in characters) and every refusal say: a
// Japanese, Greek or Russian reason of 200 characters is taken, and one past the bound
// is refused saying how long it is.
func TestReason_MultibyteUnderFiveHundredCharacters(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false)
	reason := strings.Repeat("返金済み", 50) // 200 characters, 600 bytes
	if n := utf8.RuneCountInString(reason); n != 200 || len(reason) != 600 {
		t.Fatalf("fixture: %d characters, %d bytes", n, len(reason))
	}
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"k1","reason":"`+reason+`"}`)
	if code == 400 {
		msg, _ := out["error"].(string)
		if strings.Contains(msg, "500 characters") {
			t.Errorf("a reason of %d characters (%d bytes) refused with %q: it is under 500 characters",
				utf8.RuneCountInString(reason), len(reason), msg)
		}
	}
	if code != 200 {
		t.Errorf("a reason of 200 characters: %d %v, want it taken", code, out)
	}
	// The bound itself is allowed: the refusal says "at most".
	e.record(t, "k2", `{}`, false)
	if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"k2","reason":"`+strings.Repeat("返", 500)+`"}`); code != 200 {
		t.Errorf("a reason of 500 characters: %d %v, want it taken", code, out)
	}
	long := strings.Repeat("返", 501)
	code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"k1","reason":"`+long+`"}`)
	if msg, _ := out["error"].(string); code != 400 || !strings.Contains(msg, "to 500 characters at most (it has 501)") {
		t.Errorf("a reason of 501 characters: %d %v, want 400 saying how long it is", code, out)
	}
}
