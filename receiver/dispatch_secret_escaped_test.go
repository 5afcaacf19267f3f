package receiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A downstream that quotes the request's URL in an HTML page or a JSON error writes
// forward_url's credential escaped as its format asks: &amp; and &#x2F; in HTML, \u0026
// and \/ in JSON. Each such form is masked in the stored excerpt, as the plain one is.
func TestDispatch_AnswerHidesEscapedForwardURLCredentials(t *testing.T) {
	const token = "qT0ken&Secr/et<x>-never-stored"
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		tok := r.URL.Query().Get("token")
		q, _ := json.Marshal(tok)
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "html %s|owasp %s|decimal %s|json %s|php %s|upper %s|status 404 for evt_1",
			html.EscapeString(tok),
			strings.NewReplacer("&", "&amp;", "/", "&#x2F;", "<", "&lt;", ">", "&gt;").Replace(tok),
			strings.NewReplacer("&", "&#38;", "/", "&#47;", "<", "&#60;", ">", "&#62;").Replace(tok),
			q,
			strings.ReplaceAll(tok, "/", `\/`),
			strings.NewReplacer("&", `\u0026`, "/", `\u002F`, "<", `\u003C`, ">", `\u003E`).Replace(tok))
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL+"/events?token="+url.QueryEscape(token), 1))
	accept(t, db, "evt_1", `{}`)
	waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(last.Response, "html ") || !strings.Contains(last.Response, "|status 404 for evt_1") {
		t.Fatalf("recorded answer %q; want the downstream's text kept", last.Response)
	}
	if strings.Contains(last.Response, "qT0ken") || strings.Contains(last.Response, "never-stored") {
		t.Errorf("the recorded answer holds the forward_url credential, escaped: %q", last.Response)
	}
}
