package receiver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The error of a hand-off that got no answer is stored with the attempt and shown to
// every viewer (keys and event pages, the API): it must not carry the credentials a
// forward_url holds.
func TestDispatch_ErrorHidesForwardURLCredentials(t *testing.T) {
	const password, token = "fwd-PASSWORD-never-stored", "fwd-TOKEN-never-stored"
	db := storagetest.Open(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://hookdedup:" + password + "@" + ln.Addr().String() + "/events?token=" + token
	ln.Close()
	startDispatcher(t, db, forwardSource(t, closed, 1))
	accept(t, db, "evt_1", `{}`)
	c := waitState(t, db, "evt_1", storage.StateFailed)
	if c.LastError == "" {
		t.Fatal("no error recorded")
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(c.LastError, secret) {
			t.Errorf("the recorded error %q holds the forward_url credential %q", c.LastError, secret)
		}
	}
}

// The excerpt of a downstream's answer is stored with the attempt and shown to every
// viewer too. A downstream that echoes the request's URL (Express's "Cannot POST
// /path", a framework's 404 or 401 page quoting the query) would hand it forward_url's
// credentials: the path segment and query value that the console masks, and the URL's
// password, are masked in the excerpt as well.
func TestDispatch_AnswerHidesForwardURLCredentials(t *testing.T) {
	const (
		pathToken  = "Pt7hS3cr3tT0kenInThePath"
		queryToken = "qT0kenInTheQuery-never-stored"
		password   = "fwd-PASSWORD-never-stored"
	)
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		_, pw, _ := r.BasicAuth()
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "Cannot POST %s (query %s, escaped %s, password %s) status 404 for evt_1", r.URL.Path, r.URL.Query().Get("token"),
			r.URL.RawQuery, pw)
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "http://", "http://hookdedup:"+password+"@", 1) +
		"/hooks/" + pathToken + "/events?token=" + url.QueryEscape(queryToken+" ok")
	startDispatcher(t, db, forwardSource(t, u, 1))
	accept(t, db, "evt_1", `{}`)
	waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(last.Response, "Cannot POST /hooks/") || !strings.Contains(last.Response, "status 404 for evt_1") {
		t.Fatalf("recorded answer %q; want the downstream's text kept", last.Response)
	}
	for _, secret := range []string{pathToken, queryToken, url.QueryEscape(queryToken), password} {
		if strings.Contains(last.Response, secret) {
			t.Errorf("the recorded answer %q holds the forward_url credential %q", last.Response, secret)
		}
	}
}

// A credential the excerpt's bound cuts in two is masked all the same.
func TestDispatch_AnswerHidesCredentialAtTheCut(t *testing.T) {
	const token = "qT0kenAtTheCut-never-stored"
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "%s%s", strings.Repeat("a", 1024-10), r.URL.Query().Get("token"))
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL+"/events?token="+token, 1))
	accept(t, db, "evt_1", `{}`)
	waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Response) > 1024 || !strings.HasPrefix(last.Response, "aaaa") {
		t.Fatalf("recorded answer of %d bytes; want the excerpt, at most 1024", len(last.Response))
	}
	if strings.Contains(last.Response, token[:10]) {
		t.Errorf("the recorded answer ends %q: the start of the forward_url credential", last.Response[len(last.Response)-20:])
	}
}

// The status line of a 101 answer is the downstream's text like any other: it is
// stored with the attempt's error and masked the same way.
func TestDispatch_SwitchingProtocolsStatusHidesCredentials(t *testing.T) {
	const token = "qT0kenInTheStatusLine-never-stored"
	keyErr, attemptErr := rawAnswerErrors(t, "/events?token="+token, func(r *http.Request) string {
		return "HTTP/1.1 101 Switching " + r.URL.RequestURI() + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	})
	if !strings.Contains(attemptErr, "101 Switching /events?token=") {
		t.Fatalf("recorded error %q; want the downstream's status line", attemptErr)
	}
	for _, text := range []string{attemptErr, keyErr} {
		if strings.Contains(text, token) {
			t.Errorf("the recorded error %q holds the forward_url credential %q", text, token)
		}
	}
}

// An answer net/http cannot read is quoted in its error ("malformed HTTP status code
// …"), which is stored with the attempt: the downstream's text there is masked too.
func TestDispatch_MalformedAnswerErrorHidesCredentials(t *testing.T) {
	const token = "qT0kenInAMalformedAnswer-never-stored"
	keyErr, _ := rawAnswerErrors(t, "/events?token="+token, func(r *http.Request) string {
		return "NOT-HTTP " + r.URL.RequestURI() + "\r\n\r\n"
	})
	if !strings.Contains(keyErr, "malformed HTTP") {
		t.Fatalf("recorded error %q; want net/http's", keyErr)
	}
	if strings.Contains(keyErr, token) {
		t.Errorf("the recorded error %q holds the forward_url credential %q", keyErr, token)
	}
}
