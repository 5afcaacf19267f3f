package web_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_ReleaseRefusals: a refused release says why in the fixed words of its
// refusal, for one key and in bulk, never in the text of an internal error (which
// names times and delivery ids).
func TestAPI_ReleaseRefusals(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "busy", `{}`, true) // being handed downstream, not stuck yet
	e.record(t, "gone", `{}`, false)
	sweepPayloads(t, e.db) // gone's payload; busy's is owed and stays

	for _, tt := range []struct {
		body string
		code int
		want string
	}{
		{`{"source":"ota","key":"busy","reason":"r"}`, 409, "ota/busy: " + storage.RefusedBusy.Message()},
		{`{"source":"ota","key":"gone","reason":"r","reprocess":true}`, 409, "ota/gone: " + storage.RefusedPayloadGone.Message()},
		{`{"source":"ota","key":"nope","reason":"r"}`, 404, "ota/nope: " + storage.RefusedNotFound.Message()},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", tt.body)
		if code != tt.code || out["error"] != tt.want {
			t.Errorf("%s: %d %q; want %d %q", tt.body, code, out["error"], tt.code, tt.want)
		}
	}

	for _, tt := range []struct{ body, want string }{
		{`{"source":"ota","state":"processing","reason":"r"}`, storage.RefusedBusy.Message()},
		{`{"source":"ota","state":"processed","reason":"r","reprocess":true}`, storage.RefusedPayloadGone.Message()},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", tt.body)
		results, _ := out["results"].([]any)
		if code != 200 || out["matched"] != float64(1) || out["changed"] != float64(0) || len(results) != 1 ||
			results[0].(map[string]any)["error"] != tt.want {
			t.Errorf("bulk %s: %d %v; want one result with error %q", tt.body, code, out, tt.want)
		}
	}
}
