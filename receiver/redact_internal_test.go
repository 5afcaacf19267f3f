package receiver

import "testing"

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
	} {
		if got := string(redactFields([]byte(body), tc.pointers)); got != tc.want {
			t.Errorf("%q: %s\nwant %s", tc.pointers, got, tc.want)
		}
	}
	if got := string(redactFields([]byte(`{"a":"x"`), []string{"/a"})); got != `{"a":"x"` {
		t.Errorf("not JSON: %s, want it as it is", got)
	}
}
