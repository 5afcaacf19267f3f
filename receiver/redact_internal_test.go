package receiver

import (
	"strings"
	"testing"
	"time"
)

// TestRedactFields_Nested: a field inside another that is masked goes with it, in
// whichever order the pointers come, and the rest of the body stays byte for byte.
func TestRedactFields_Nested(t *testing.T) {
	body := `{"a": {"t": "x", "u": 1},  "b" :"y", "c":[1,{"t":"z"}]}`
	for _, tc := range []struct {
		pointers []string
		want     string
	}{
		{[]string{"/a", "/a/t"}, `{"a": "[redacted]",  "b" :"y", "c":[1,{"t":"z"}]}`},
		{[]string{"/a/t", "/a", "/c/1/t"}, `{"a": "[redacted]",  "b" :"y", "c":[1,{"t":"[redacted]"}]}`},
		{[]string{"/b", "/a/u", "/nothing"}, `{"a": {"t": "x", "u": "[redacted]"},  "b" :"[redacted]", "c":[1,{"t":"z"}]}`},
		{nil, body},
		{[]string{""}, `"[redacted]"`},
	} {
		if got := string(redactFields([]byte(body), tc.pointers)); got != tc.want {
			t.Errorf("%q: %s\nwant %s", tc.pointers, got, tc.want)
		}
	}
	// A body cut short is not JSON, but what it holds of the field is still masked.
	if got := string(redactFields([]byte(`{"a":"x"`), []string{"/a"})); got != `{"a":"[redacted]"` {
		t.Errorf("not JSON: %s, want the field masked", got)
	}
	if got := string(redactFields([]byte(`a=x&b=y`), []string{"/a"})); got != `a=x&b=y` {
		t.Errorf("a form: %s, want it as it is", got)
	}
}

// TestRedactFields_OddJSON: a body refused for being odd JSON is kept, and the credential
// in it is masked all the same: every member of a repeated name (which jsontext refuses,
// and encoding/json takes the last of), a name written with escapes, a body behind a
// byte-order mark, and one nested deeper than encoding/json reads.
func TestRedactFields_OddJSON(t *testing.T) {
	const secret = "9E5E84E9974D4F169662AB2200F27CB1"
	ptrs := []string{"/Data/AccessToken"}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, tc := range []struct{ name, body, want string }{
		{"RepeatedMember", `{"Data":{"AccessToken":"a","AccessToken":"` + secret + `"}}`,
			`{"Data":{"AccessToken":"[redacted]","AccessToken":"[redacted]"}}`},
		{"RepeatedParent", `{"Data":{"Id":1},"Data":{"AccessToken":"` + secret + `"}}`,
			`{"Data":{"Id":1},"Data":{"AccessToken":"[redacted]"}}`},
		{"EscapedName", `{"Data":{"Access\u0054oken":"` + secret + `"}}`,
			`{"Data":{"Access\u0054oken":"[redacted]"}}`},
		{"ByteOrderMark", "\uFEFF" + `{"Data":{"AccessToken":"` + secret + `"}}`,
			"\uFEFF" + `{"Data":{"AccessToken":"[redacted]"}}`},
		{"Deep", `{"Data":{"AccessToken":"` + secret + `"},"x":` + deep + `}`,
			`{"Data":{"AccessToken":"[redacted]"},"x":` + deep + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(redactFields([]byte(tc.body), ptrs))
			if strings.Contains(got, secret) || got != tc.want {
				t.Errorf("kept %.200s\nwant %.200s", got, tc.want)
			}
		})
	}
}

// TestRedactFields_ManyRepeats: a body of the largest size whose one name repeats in
// every member is masked in one pass over it, not one per member.
func TestRedactFields_ManyRepeats(t *testing.T) {
	body := `{"Data":{` + strings.Repeat(`"AccessToken":"x",`, 1<<16) + `"AccessToken":"x"}}`
	start := time.Now()
	got := redactFields([]byte(body), []string{"/Data/AccessToken"})
	if n := strings.Count(string(got), `"[redacted]"`); n != 1<<16+1 {
		t.Errorf("%d values masked, want %d", n, 1<<16+1)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("masking took %s", d)
	}
}
