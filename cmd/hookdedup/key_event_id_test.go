package main

import (
	"strings"
	"testing"
)

// TestKey_UnusableEventID: a delivery that carries its event id in a form that cannot
// be a key (a fraction, an empty string) is keyed from its key fields. `hookdedup key`
// says why, as intake's 422 would, not that the delivery carries no id.
func TestKey_UnusableEventID(t *testing.T) {
	const config = `
[[source]]
name = "pms"
signature = "none"
event_id = "/id"
key_fields = ["/booking_id"]
`
	for body, why := range map[string]string{
		`{"id":1.5,"booking_id":"B-1"}`:   `event id "/id" is 1.5, not an integer`,
		`{"id":"","booking_id":"B-1"}`:    `event id "/id" is an empty string`,
		`{"booking_id":"B-1"}`:            `event id "/id" is absent`,
		`{"id":null,"booking_id":"B-1"}`:  `event id "/id" is null`,
		`{"id":{"n":1},"booking_id":"B"}`: `event id "/id" is an object`,
	} {
		out, err := keyWith(t, t.TempDir(), config, body, "--source", "pms")
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if !strings.Contains(out, why) || strings.Contains(out, "carries no") {
			t.Errorf("%s: want the method explained by %q:\n%s", body, why, out)
		}
	}
}
