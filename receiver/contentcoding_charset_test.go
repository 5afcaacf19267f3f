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

// A character set other than UTF-8 in Content-Encoding ("latin1") is refused 415 naming
// it, and saying it names no compression: "send the body uncompressed" would send the
// sender looking for a compression it never applied.
func TestHandler_ContentEncodingOtherCharset(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	for _, coding := range []string{"latin1", "ISO-8859-1"} {
		code, a, _ := e.post(t, "ota", "evt_"+coding, cancellation, func(r *http.Request) { r.Header.Set("Content-Encoding", coding) })
		want := `Content-Encoding "` + coding + `" is not supported: it names no compression (a character set belongs in Content-Type's charset); send UTF-8 JSON without Content-Encoding`
		if code != http.StatusUnsupportedMediaType || a.Error != want {
			t.Errorf("Content-Encoding %q: %d %q, want 415 %q", coding, code, a.Error, want)
		}
	}
	code, a, _ := e.post(t, "ota", "evt_br", cancellation, func(r *http.Request) { r.Header.Set("Content-Encoding", "identity, br") })
	if want := `Content-Encoding "identity, br" is not supported: send the body uncompressed`; code != http.StatusUnsupportedMediaType || a.Error != want {
		t.Errorf("Content-Encoding br: %d %q, want 415 %q", code, a.Error, want)
	}
}
