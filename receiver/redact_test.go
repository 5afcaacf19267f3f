package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A sender with the path wrong (a typo, another source's URL) still sends the right
// token in its header. The rejection is stored and every viewer reads its headers: a
// header that carries any source's token is redacted whichever path it came to.
func TestHandler_TokenRedactedOnAnyPath(t *testing.T) {
	pms := pmsTokenSource(t)
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
