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

// TestDispatch_LongStatusLineCut: net/http takes a status line of up to the answer's
// header bound, 64 KiB, and the attempt's error and the key's last error quote it,
// stored with every attempt and listed on the keys pages, fifty keys a page. Like the
// answer's excerpt, it is kept to a bound: its first 256 bytes, and "…".
func TestDispatch_LongStatusLineCut(t *testing.T) {
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 500 Internal %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", strings.Repeat("é", 25_000))
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
		if !strings.HasPrefix(text, "downstream answered 500 Internal éé") || !strings.HasSuffix(text, "é…") {
			t.Errorf("recorded error %.80q…; want the status line's start, cut on a character, then …", text)
		}
		if len(text) > 300 {
			t.Errorf("recorded error of %d bytes; want the status line cut at 256", len(text))
		}
	}
}
