package receiver

import (
	"strings"
	"testing"
)

// TestJSONScans_StepOverStrings: the scans that look for numbers beyond float64 and
// for nesting step over strings alike, an escaped quote or backslash within them
// included: what a string holds is never read as a number or a bracket, and what
// follows a string is.
func TestJSONScans_StepOverStrings(t *testing.T) {
	for _, c := range []struct {
		body    string
		inRange bool
	}{
		{`{"a":"1e999"}`, true},
		{`{"a":"x\"1e999","b":1}`, true},
		{`{"a":"x\\","b":1e999}`, false},
		{`["\\\"",1e999]`, false},
		{`["\\\\",1e999]`, false},
		{`[1e308,"1e999"]`, true},
	} {
		if err := numbersInRange([]byte(c.body)); (err == nil) != c.inRange {
			t.Errorf("numbersInRange(%s) = %v, want in range %v", c.body, err, c.inRange)
		}
	}
	deep := strings.Repeat("[", maxJSONDepth+1)
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`["` + deep + `"]`, true},
		{`["\"` + deep + `"]`, true},
		{`["\\",` + deep, false},
		{`"\\"` + deep, false},
		{`"` + deep, true},
		{`"\`, true},
	} {
		if err := precheckBody([]byte(c.body)); (err == nil) != c.ok {
			t.Errorf("precheckBody(%.40s…) = %v, want ok %v", c.body, err, c.ok)
		}
	}
}
