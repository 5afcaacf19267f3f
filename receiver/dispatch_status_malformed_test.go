package receiver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_MalformedStatusLineCut: a status line net/http refuses comes back in its
// error, quoted whole ("malformed HTTP status code …"), up to the answer's header bound;
// the attempt's error keeps to the bound a well-formed one keeps to.
func TestDispatch_MalformedStatusLineCut(t *testing.T) {
	for name, line := range map[string]string{
		"status code": "HTTP/1.1 " + strings.Repeat("5", 30_000) + " Internal",
		"no blank":    "HTTP/1.1" + strings.Repeat("x", 30_000),
	} {
		t.Run(name, func(t *testing.T) {
			db := storagetest.Open(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				fmt.Fprintf(buf, "%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", line)
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
