package receiver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A forward_url's user and password go downstream as an Authorization header,
// "Basic " and the base64 of "user:password" (net/http), and a downstream that echoes
// the request's headers (an error page that dumps them, a debugging endpoint) puts
// that in its answer: decoded at a glance, it is the credential, and the excerpt is
// shown to every viewer. It is masked as the password itself is, as is the header of
// a URL whose user name stands for a token.
func TestDispatch_AnswerHidesEchoedBasicAuthorization(t *testing.T) {
	for _, userinfo := range []string{"hookdedup:fwd-PASSWORD-never-stored", "tok-USERNAME-standing-for-a-token"} {
		t.Run(userinfo, func(t *testing.T) {
			db := storagetest.Open(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "request headers: Authorization: %s; JSON {\"authorization\":%q}; status 500 for evt_1",
					r.Header.Get("Authorization"), strings.ReplaceAll(r.Header.Get("Authorization"), "/", `\/`))
			}))
			t.Cleanup(srv.Close)
			startDispatcher(t, db, forwardSource(t, strings.Replace(srv.URL, "http://", "http://"+userinfo+"@", 1)+"/events", 1))
			accept(t, db, "evt_1", `{}`)
			waitState(t, db, "evt_1", storage.StateFailed)
			last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(last.Response, "request headers: Authorization: Basic ") || !strings.Contains(last.Response, "status 500 for evt_1") {
				t.Fatalf("recorded answer %q; want the downstream's text kept", last.Response)
			}
			user, pass, _ := strings.Cut(userinfo, ":")
			encoded := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
			for _, secret := range []string{encoded, encoded[:len(encoded)-4], strings.ReplaceAll(encoded, "/", `\/`)} {
				if strings.Contains(last.Response, secret) {
					t.Errorf("the recorded answer %q holds the forward_url credential as its Authorization header sends it, %q", last.Response, secret)
				}
			}
		})
	}
}
