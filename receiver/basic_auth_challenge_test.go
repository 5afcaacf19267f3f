package receiver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestHandler_BasicAuthChallenge: a basic-auth source's 401 carries a Basic challenge
// (WWW-Authenticate), as HTTP requires of every 401: a sender whose client sends its
// credentials only when challenged (.NET's HttpClient with Credentials, Java's
// Authenticator) answers it with them, where without it every delivery stayed refused.
// A scheme that no challenge asks for (a token header, a signature) gets none.
func TestHandler_BasicAuthChallenge(t *testing.T) {
	basic, err := signature.New(signature.Config{Scheme: "basic-auth", Secrets: []string{"s3cret-pass"}, BasicUser: "hotel"})
	if err != nil {
		t.Fatal(err)
	}
	pms := receiver.Source{Name: "pms", Verifier: basic, Keys: receiver.KeySpec{EventID: []string{"/id"}}, TTL: time.Hour}
	tok := pmsTokenSource(t)
	tok.Name = "tok"
	e := newEnv(t, sqlite.Options{}, pms, tok)
	e.src = pms

	// A client that waits for the challenge: first without credentials, then, told
	// which scheme, with them.
	code, a, h := e.post(t, "pms", "", `{"id":"e1"}`, nil)
	challenge := h.Get("WWW-Authenticate")
	if code != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Basic realm="`) || !strings.Contains(a.Error, "Authorization") {
		t.Fatalf("no credentials: %d %+v, WWW-Authenticate %q; want 401 naming Authorization, with a Basic challenge", code, a, challenge)
	}
	code, a, h = e.post(t, "pms", "", `{"id":"e1"}`, func(r *http.Request) { r.SetBasicAuth("hotel", "wrong") })
	if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") != challenge {
		t.Fatalf("wrong password: %d %+v, WWW-Authenticate %q; want 401 with the challenge %q", code, a, h.Get("WWW-Authenticate"), challenge)
	}
	code, a, _ = e.post(t, "pms", "", `{"id":"e1"}`, func(r *http.Request) { r.SetBasicAuth("hotel", "s3cret-pass") })
	if code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("answering the challenge: %d %+v, want accepted", code, a)
	}

	if code, _, h := e.post(t, "tok", "", `{"id":"e1"}`, nil); code != http.StatusUnauthorized || h.Get("WWW-Authenticate") != "" {
		t.Fatalf("token source: %d, WWW-Authenticate %q; want 401 without a challenge", code, h.Get("WWW-Authenticate"))
	}
	if code, _, h := e.post(t, "nope", "", `{"id":"e1"}`, nil); code != http.StatusNotFound || h.Get("WWW-Authenticate") != "" {
		t.Fatalf("unknown source: %d, WWW-Authenticate %q; want 404 without a challenge", code, h.Get("WWW-Authenticate"))
	}
}
