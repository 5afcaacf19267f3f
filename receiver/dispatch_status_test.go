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

// rawAnswerErrors forwards one event, with a single attempt, to a downstream at path
// that answers with head (the status line and headers, written raw, as net/http would
// refuse to) for the request it got, and returns the errors recorded once the key has
// failed: the key's last error and its attempt's.
func rawAnswerErrors(t *testing.T, path string, head func(r *http.Request) string) (keyErr, attemptErr string) {
	t.Helper()
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, head(r))
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL+path, 1))
	accept(t, db, "evt_1", `{}`)
	c := waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	return c.LastError, last.Error
}

// closed is the rest of a raw answer after its status line: no body, and the
// connection ends.
const closed = "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// TestDispatch_StatusLineControlCharactersNotStored: net/http takes an answer's reason
// phrase as the downstream wrote it, control characters and all. The status line is
// stored as the attempt's error and the key's last error, which `hookdedup keys` prints
// on the operator's terminal, in a table of tab-separated columns: an escape sequence
// there would clear the screen or retitle the window, a tab shift the columns. Such
// characters are stored as U+FFFD; the rest of the line stays.
func TestDispatch_StatusLineControlCharactersNotStored(t *testing.T) {
	keyErr, attemptErr := rawAnswerErrors(t, "", func(*http.Request) string {
		return "HTTP/1.1 500 \x1b[2J\x1b]0;owned\x07Internal\tError\x7f\xc2\x9b\xe9" + closed
	})
	for _, text := range []string{keyErr, attemptErr} {
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

// TestDispatch_LongStatusLineCut: net/http takes a status line of up to the answer's
// header bound, 64 KiB, and the attempt's error and the key's last error quote it,
// stored with every attempt and listed on the keys pages, fifty keys a page. Like the
// answer's excerpt, it is kept to a bound: its first 256 bytes, and "…".
func TestDispatch_LongStatusLineCut(t *testing.T) {
	keyErr, attemptErr := rawAnswerErrors(t, "", func(*http.Request) string {
		return "HTTP/1.1 500 Internal " + strings.Repeat("é", 25_000) + closed
	})
	for _, text := range []string{keyErr, attemptErr} {
		if !strings.HasPrefix(text, "downstream answered 500 Internal éé") || !strings.HasSuffix(text, "é…") {
			t.Errorf("recorded error %.80q…; want the status line's start, cut on a character, then …", text)
		}
		if len(text) > 300 {
			t.Errorf("recorded error of %d bytes; want the status line cut at 256", len(text))
		}
	}
}

// TestDispatch_MalformedStatusLineCut: a status line net/http refuses comes back in its
// error, quoted whole ("malformed HTTP status code …"), up to the answer's header bound;
// the attempt's error keeps to the bound a well-formed one keeps to.
func TestDispatch_MalformedStatusLineCut(t *testing.T) {
	for name, line := range map[string]string{
		"status code": "HTTP/1.1 " + strings.Repeat("5", 30_000) + " Internal",
		"no blank":    "HTTP/1.1" + strings.Repeat("x", 30_000),
	} {
		t.Run(name, func(t *testing.T) {
			keyErr, attemptErr := rawAnswerErrors(t, "", func(*http.Request) string { return line + closed })
			for _, text := range []string{keyErr, attemptErr} {
				if !strings.Contains(text, "malformed HTTP") || !strings.HasSuffix(text, "…") {
					t.Errorf("recorded error %.120q; want net/http's, cut and followed by …", text)
				}
				if len(text) > 300 {
					t.Errorf("recorded error of %d bytes; want it cut at 256", len(text))
				}
			}
		})
	}
}
