package receiver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestReject_RedactFieldsMasked: a refused delivery keeps its body for whoever looks
// into why, but not the credentials the source says its sender's bodies may carry. A
// Mews Integration Webhook sent to the General Webhooks' URL (Mews allows one URL for
// both) carries the property's Connector API access token in Data.AccessToken; the
// source refuses it, having no Events, and kept it whole, for every console user to
// read.
func TestReject_RedactFieldsMasked(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"mews-url-token-1"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys:         receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}},
		RedactFields: []string{"/Data/AccessToken", "/Data/Refresh"}}
	e := newEnv(t, sqlite.Options{}, src)
	const token = "9E5E84E9974D4F169662AB2200F27CB1-00B343A0DDA725CACAC028E38E3EABF"
	for _, tc := range []struct{ name, body, want string }{
		{"IntegrationCreated", `{"Action":"IntegrationCreated","Data":{"Enterprise":{"Id":"8865aa96"},"AccessToken": "` + token + `","IsEnabled":true}}`,
			`{"Action":"IntegrationCreated","Data":{"Enterprise":{"Id":"8865aa96"},"AccessToken": "[redacted]","IsEnabled":true}}`},
		// Whatever the field holds is masked, and each named field is.
		{"NotAString", `{"Action":"x","Data":{"Refresh":{"t":"` + token + `"},"AccessToken":["` + token + `"]}}`,
			`{"Action":"x","Data":{"Refresh":"[redacted]","AccessToken":"[redacted]"}}`},
		{"Absent", `{"Action":"x","Data":{"Id":"` + "a" + `"}}`, `{"Action":"x","Data":{"Id":"a"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, a := postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url-token-1", tc.body)
			if code != http.StatusUnprocessableEntity {
				t.Fatalf("%d %q, want 422", code, a.Error)
			}
			page, err := e.db.Deliveries(context.Background(), storage.DeliveryFilter{Outcome: storage.Rejected, Limit: 1})
			if err != nil || len(page.Deliveries) != 1 {
				t.Fatalf("rejected deliveries: %v, %v", page, err)
			}
			d, err := e.db.Delivery(context.Background(), page.Deliveries[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(d.Body); got != tc.want || strings.Contains(got, token) {
				t.Errorf("kept body %s\nwant %s", got, tc.want)
			}
		})
	}
}
