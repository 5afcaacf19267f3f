package receiver_test

import (
	"net/http"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// Some senders put the body's character set in Content-Encoding ("UTF-8"), a known
// mislabel of a plain body: it names no compression, the body is the JSON that was
// signed, and a 415 would have the provider retry an event hookdedup can take.
func TestHandler_ContentEncodingCharset(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	for _, coding := range []string{"UTF-8", "utf8", "identity, utf-8"} {
		code, a, _ := e.post(t, "ota", "evt_"+coding, cancellation, func(r *http.Request) { r.Header.Set("Content-Encoding", coding) })
		if code != http.StatusOK {
			t.Errorf("Content-Encoding %q: %d %q, want 200", coding, code, a.Error)
		}
	}
}
