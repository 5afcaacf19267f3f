package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A sender with the path wrong (a typo, another source's URL) still sends the right
// token in its header. The rejection is stored and every viewer reads its headers: a
// header that carries any source's token is redacted whichever path it came to.
func TestHandler_TokenRedactedOnAnyPath(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", Secrets: []string{"s3cret-token"}, TokenHeader: "X-Webhook-Token"})
	if err != nil {
		t.Fatal(err)
	}
	pms := receiver.Source{Name: "pms", Verifier: v, Keys: receiver.KeySpec{EventID: "/id"}, TTL: time.Hour,
		RedactHeaders: []string{"X-Webhook-Token"}}
	e := newEnv(t, sqlite.Options{}, pms, otaSource(t))
	for i, path := range []string{"pms-typo", "ota"} {
		code, _, _ := e.post(t, path, "", `{"id":"e1"}`, func(r *http.Request) {
			r.Header.Set("X-Webhook-Token", "s3cret-token")
		})
		if code == http.StatusOK {
			t.Fatalf("POST /webhooks/%s = 200, want a rejection", path)
		}
		d, err := e.db.Delivery(context.Background(), int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome != storage.Rejected {
			t.Fatalf("delivery %d = %+v, want the rejection", i+1, d)
		}
		raw, _ := json.Marshal(d.Headers)
		if bytes.Contains(raw, []byte("s3cret")) {
			t.Errorf("POST /webhooks/%s: stored headers carry pms's token: %s", path, raw)
		}
	}
}
