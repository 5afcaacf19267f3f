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

// TestDispatch_AnswerHeadersBounded: a downstream's answer is read within a bound, its
// headers as well as its body. Left to net/http's default, each attempt read up to
// 10 MiB of headers, eight attempts at once: a downstream answering so (a broken proxy,
// a hostile host behind forward_url) took serve from 24 MB to 177 MB. Past the bound
// the attempt fails, saying why, and is retried as any failure.
func TestDispatch_AnswerHeadersBounded(t *testing.T) {
	db := storagetest.Open(t)
	filler := strings.Repeat("a", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		for i := range 1024 { // 1 MiB of headers
			w.Header().Set(fmt.Sprintf("X-Filler-%d", i), filler)
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL, 1))
	accept(t, db, "evt_headers", `{"id":"evt_headers"}`)
	c := waitState(t, db, "evt_headers", storage.StateFailed)
	as, err := db.Attempts(context.Background(), "ota", "evt_headers")
	if err != nil || len(as) != 1 {
		t.Fatalf("attempts %+v, %v; want one", as, err)
	}
	if as[0].Status != 0 || !strings.Contains(as[0].Error, "headers exceeded") {
		t.Errorf("attempt answered with 1 MiB of headers: status %d, error %q (key's %q); want it cut short at the bound, saying so",
			as[0].Status, as[0].Error, c.LastError)
	}
}

// The bound leaves room for what a downstream answers in earnest.
func TestDispatch_AnswerHeadersWithinBound(t *testing.T) {
	db := storagetest.Open(t)
	filler := strings.Repeat("a", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		for i := range 32 { // 32 KiB: cookies, a tracing header, a CSP
			w.Header().Set(fmt.Sprintf("X-Filler-%d", i), filler)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL, 1))
	accept(t, db, "evt_fine", `{"id":"evt_fine"}`)
	waitState(t, db, "evt_fine", storage.StateProcessed)
}
