package web

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestIndentGrowth: the growth prettyBody weighs is never below what indenting adds,
// whatever the shape, strings holding brackets, commas and escaped quotes included, so
// that no body passes the bound and then grows past it.
func TestIndentGrowth(t *testing.T) {
	for _, body := range []string{
		`{}`, `[]`, `[[[]]]`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":{"d":"e"}}`,
		`{"s":"[,{:}]\"[[[,,,"}`, `[1, 2,	3]`, "{\n\"a\" : [ ]\n}", `[{"a":[{"b":[{"c":[]}]}]}]`,
	} {
		var out bytes.Buffer
		if err := json.Indent(&out, []byte(body), "", "  "); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if added, got := out.Len()-len(body), indentGrowth([]byte(body)); got < added {
			t.Errorf("%s: indentGrowth %d, but indenting adds %d", body, got, added)
		}
	}
}
