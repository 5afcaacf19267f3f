package web_test

import (
	"strings"
	"testing"
)

// TestAPI_BulkTimeRange: a bulk filter's from and to through the API are held to the
// rule of every filter with from and to: a bound before the year 2000 is refused,
// naming it, rather than made a preview (a to of 1999 matched no key, and read as an
// action that found nothing to do). The zero time stays no bound, as a client's unset
// time may be sent.
func TestAPI_BulkTimeRange(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{"a":1}`, false)
	for _, tt := range []struct{ name, filter, want string }{
		{"FromBefore2000", `"from":"1999-12-31T23:00:00Z"`, "from="},
		{"ToBefore2000", `"to":"1999-06-01T00:00:00Z"`, "to="},
		{"BothBefore2000", `"from":"1980-01-01T00:00:00Z","to":"1999-01-01T00:00:00Z"`, "from="},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"kind":"release","reason":"check","filter":{"source":"ota",` + tt.filter + `}}`
			code, out := e.call(t, "operator", "POST", "/api/v1/bulk", body)
			msg, _ := out["error"].(string)
			if code != 400 || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "2000") {
				t.Fatalf("%s: %d %v, want 400 naming %s before 2000", tt.filter, code, out, tt.want)
			}
		})
	}
	for _, filter := range []string{`"from":"2000-01-01T00:00:00Z"`, `"from":"0001-01-01T00:00:00Z"`} {
		code, out := e.call(t, "operator", "POST", "/api/v1/bulk", `{"kind":"release","reason":"check","filter":{"source":"ota",`+filter+`}}`)
		if code != 201 || out["total"] != 1.0 {
			t.Fatalf("%s: %d %v, want 201 with the one key", filter, code, out)
		}
	}
}
