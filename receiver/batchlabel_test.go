package receiver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestMetrics_UnsignedPerItemBatchNotLabelledInvalidBody: an Adyen source signs each
// item, not the request: before every item's signature is checked, the body is anyone's.
// A body that is JSON but not shaped as the batch is then unreadable, as anyone's body
// that is not JSON is, not invalid_body, which is a signed body's.
func TestMetrics_UnsignedPerItemBatchNotLabelledInvalidBody(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	post := func(body string) int {
		resp, err := http.Post(e.srv.URL+"/webhooks/adyen", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	reason := func(labels string) string {
		_, r, _ := strings.Cut(labels, `reason="`)
		r, _, _ = strings.Cut(r, `"`)
		return r
	}
	if code := post(`{"live":"false","notificationItems":{"x":1}}`); code != http.StatusUnprocessableEntity {
		t.Fatalf("unsigned body not shaped as the batch: %d, want 422", code)
	}
	for _, l := range metricLabels(t, e.srv.URL, "hookdedup_rejections_total") {
		if reason(l) == "invalid_body" {
			t.Errorf("an unauthenticated per-item batch request (no item signature checked, body not kept) is counted as "+
				"hookdedup_rejections_total{%s}: invalid_body is documented as a signed body's; an unauthenticated "+
				"400 of the same source is unreadable", l)
		}
	}
}
