package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestHandler_NoKeyBodyNotAnObject: a source without batch that gets several events in
// a JSON array (a sender that batches), or a body that is no object at all, refuses it
// 422 saying what the body is: "none of the key fields is present" alone, of a body
// whose every element holds them, sends the operator looking for a typo in key_fields.
func TestHandler_NoKeyBodyNotAnObject(t *testing.T) {
	src := otaSource(t)
	src.Keys = receiver.KeySpec{KeyFields: []string{"/booking_id", "/status"}}
	e := newEnv(t, sqlite.Options{}, src)
	for i, tc := range []struct{ body, want string }{
		{`[{"booking_id":"BK-1","status":"cancelled"},{"booking_id":"BK-2","status":"confirmed"}]`,
			"the body is a JSON array, not an object"},
		{` "BK-1" `, "the body is a JSON string, not an object"},
		{`17`, "the body is a JSON number, not an object"},
	} {
		code, a, _ := e.post(t, "ota", fmt.Sprint("msg_", i), tc.body, nil)
		if code != http.StatusUnprocessableEntity || !strings.HasPrefix(a.Error, "no idempotency key: ") ||
			!strings.Contains(a.Error, tc.want) {
			t.Errorf("%s: %d %q, want 422 saying %q", tc.body, code, a.Error, tc.want)
		}
	}
	// An array of events: the answer says how batch takes them.
	code, a, _ := e.post(t, "ota", "msg_batch", `[{"booking_id":"BK-3","status":"cancelled"}]`, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, `with batch, "#" for a body that is itself the array`) {
		t.Errorf("%d %q, want 422 naming batch", code, a.Error)
	}
	// An object without the fields says only what it always said.
	code, a, _ = e.post(t, "ota", "msg_obj", `{"note":"nothing to key on"}`, nil)
	if want := `no idempotency key: none of the key fields "/booking_id", "/status" is present`; code != 422 || a.Error != want {
		t.Errorf("%d %q, want 422 %q", code, a.Error, want)
	}
	// The key command reads the body as intake does, and says the same.
	if _, err := receiver.Derive(src.Keys, http.Header{}, []byte(`[{"booking_id":"BK-1"}]`)); err == nil ||
		!strings.Contains(err.Error(), "the body is a JSON array, not an object") {
		t.Errorf("Derive: %v, want it to say the body is an array", err)
	}
	d, err := e.db.Delivery(context.Background(), 1)
	if err != nil || d.Status != 422 || !strings.Contains(d.Error, "JSON array") {
		t.Errorf("stored rejection %+v %v, want the 422 with its reason", d, err)
	}
}
