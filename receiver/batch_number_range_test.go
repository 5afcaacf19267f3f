package receiver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBatch_NumberBeyondFloat64OutsideItems: a body with a number beyond IEEE-754 is
// refused 400, as a single delivery's is, wherever the number sits: in the envelope,
// which is handed downstream with every item, or beside an item in its element. None of
// its items is claimed.
func TestBatch_NumberBeyondFloat64OutsideItems(t *testing.T) {
	good1 := adyenItem(t, "A1A1A1A1A1A1A1A1", "REFUND", 100)
	for name, body := range map[string]string{
		"Envelope": strings.Replace(adyenBody(good1), `"live": "false"`, `"live": "false", "total": 1e400`, 1),
		"Element":  strings.Replace(adyenBody(good1), `{"NotificationRequestItem": `, `{"weight": -2E+999, "NotificationRequestItem": `, 1),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, sqlite.Options{}, adyenSource(t))
			code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", body)
			if code != http.StatusBadRequest || !strings.Contains(a.Error, "number outside the float64 range") {
				t.Fatalf("%d %q, want 400 naming the number", code, a.Error)
			}
			got, claims := countRows(t, e.db, "adyen")
			if got["accepted"] != 0 || claims != 0 {
				t.Fatalf("stored %v and %d claims, want nothing but the rejection", got, claims)
			}
		})
	}
}
