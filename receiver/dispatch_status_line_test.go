package receiver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_StatusLineControlCharactersNotStored: net/http takes an answer's reason
// phrase as the downstream wrote it, control characters and all. The status line is
// stored as the attempt's error and the key's last error, which `hookdedup keys` prints
// on the operator's terminal, in a table of tab-separated columns: an escape sequence
// there would clear the screen or retitle the window, a tab shift the columns. Such
// characters are stored as U+FFFD; the rest of the line stays.
func TestDispatch_StatusLineControlCharactersNotStored(t *testing.T) {
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 500 \x1b[2J\x1b]0;owned\x07Internal\tError\x7f\xc2\x9b\xe9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL, 1))
	accept(t, db, "evt_1", `{}`)
	c := waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{c.LastError, last.Error} {
		if !strings.HasPrefix(text, "downstream answered 500 ") || !strings.Contains(text, "Internal") || !strings.Contains(text, "Error") {
			t.Errorf("recorded error %q; want the downstream's status line", text)
		}
		if !utf8.ValidString(text) {
			t.Errorf("recorded error %q is not UTF-8", text)
		}
		for _, r := range text {
			if r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f {
				t.Errorf("recorded error %q holds the control character %U", text, r)
			}
		}
		if !strings.Contains(text, "Internal\uFFFDError") {
			t.Errorf("recorded error %q; want each control character as U+FFFD", text)
		}
	}
}
