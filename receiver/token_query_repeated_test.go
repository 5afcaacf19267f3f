package receiver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A URL that gives the token parameter more than once is refused naming the repeated
// parameter, whether or not one of its values is the token: not read by its first,
// empty value as if it carried none, nor tried value by value.
func TestBatch_TokenQueryRepeated(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"mews-url-token-1"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}}
	e := newEnv(t, sqlite.Options{}, src)
	body := `{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5c7e9b1"}}]}`
	for _, q := range []string{"token=&token=mews-url-token-1", "token=mews-url-token-1&token=mews-url-token-1", "token=x&token=mews-url-token-1"} {
		code, a := postBatch(t, e.srv.URL, "/webhooks/mews?"+q, body)
		if want := "signature: query parameter token is given 2 times: send it once"; code != http.StatusUnauthorized || a.Error != want {
			t.Errorf("?%s: %d %q, want 401 %q", q, code, a.Error, want)
		}
	}
	if code, a := postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url-token-1", body); code != http.StatusOK {
		t.Errorf("the token once: %d %q, want 200", code, a.Error)
	}
}
