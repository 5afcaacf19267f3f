package web

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestJSONShape: the growth prettyBody weighs is never below what indenting adds,
// whatever the shape, strings holding brackets, commas and escaped quotes included, so
// that no body passes the bound and then grows past it.
func TestJSONShape(t *testing.T) {
	for _, body := range []string{
		`{}`, `[]`, `[[[]]]`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":{"d":"e"}}`,
		`{"s":"[,{:}]\"[[[,,,"}`, `[1, 2,	3]`, "{\n\"a\" : [ ]\n}", `[{"a":[{"b":[{"c":[]}]}]}]`,
	} {
		var out bytes.Buffer
		if err := json.Indent(&out, []byte(body), "", "  "); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if _, got := jsonShape([]byte(body)); got < out.Len()-len(body) {
			t.Errorf("%s: growth %d, but indenting adds %d", body, got, out.Len()-len(body))
		}
	}
}

// TestJSONShape_DepthOutsideStrings: brackets inside strings, escaped quotes included,
// do not count as nesting.
func TestJSONShape_DepthOutsideStrings(t *testing.T) {
	for body, want := range map[string]int{
		`{}`:                         1,
		`{"s":"[[[[{{{{"}`:           1,
		`{"s":"\"[[[","t":[["]]"]]}`: 3,
		`["\\",[["\\\"[["]]]`:        3,
		`"[[["`:                      0,
	} {
		if got, _ := jsonShape([]byte(body)); got != want {
			t.Errorf("%s: deepest %d, want %d", body, got, want)
		}
	}
}
