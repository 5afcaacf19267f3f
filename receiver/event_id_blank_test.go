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

// TestHandler_EventIDOfSpacesAlone: an event id of spaces alone identifies no event, as
// an empty one does not: a sender that fills the field so for every event would have
// every event after the first answered duplicate and never handed downstream. The key
// comes from the key fields instead, and with none present the delivery is refused 422
// with the reason, as one whose event id is empty.
func TestHandler_EventIDOfSpacesAlone(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, pmsSource(t))

	code, first, _ := e.post(t, "pms", "", `{"event_id":"  ","booking_id":"BK-1","status":"cancelled"}`, nil)
	if code != http.StatusOK || first.Status != "accepted" || !strings.HasPrefix(first.Key, "derived:") {
		t.Fatalf("first event: %d %+v, want accepted under a key derived from its fields", code, first)
	}
	code, second, _ := e.post(t, "pms", "", `{"event_id":"  ","booking_id":"BK-2","status":"cancelled"}`, nil)
	if code != http.StatusOK || second.Status != "accepted" || second.Key == first.Key {
		t.Fatalf("another booking's event with the same blank id: %d %+v, want accepted under its own key", code, second)
	}
	code, a, _ := e.post(t, "pms", "", `{"event_id":"   ","note":"nothing else"}`, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, `event id "/event_id" is spaces alone`) {
		t.Fatalf("blank id and no key fields: %d %+v, want 422 saying the id is spaces alone", code, a)
	}
}

// TestHandler_EventIDOfUnicodeBlanksAlone: an id of no-break, ideographic or zero-width
// spaces alone identifies no event either (a sender padding an empty field with them
// would have every event after the first answered duplicate): the key comes from the
// key fields, as for ordinary spaces. An id with such a space among other characters is
// an id.
func TestHandler_EventIDOfUnicodeBlanksAlone(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, pmsSource(t))

	for i, blank := range []string{`\u00a0`, `\u3000`, `\u200b`, `\u2060\ufeff`, ` \u00a0 `} {
		booking := "BK-" + string(rune('1'+i))
		code, a, _ := e.post(t, "pms", "", `{"event_id":"`+blank+`","booking_id":"`+booking+`","status":"cancelled"}`, nil)
		if code != http.StatusOK || a.Status != "accepted" || !strings.HasPrefix(a.Key, "derived:") {
			t.Errorf("event id %q: %d %+v, want accepted under a key derived from its fields", blank, code, a)
		}
	}
	code, a, _ := e.post(t, "pms", "", `{"event_id":"\u200b","note":"nothing else"}`, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, `event id "/event_id" is spaces alone`) {
		t.Errorf("zero-width id and no key fields: %d %+v, want 422 saying the id is spaces alone", code, a)
	}
	code, a, _ = e.post(t, "pms", "", `{"event_id":"evt\u00a01","booking_id":"BK-9","status":"cancelled"}`, nil)
	if code != http.StatusOK || a.Key != "evt\u00a01" {
		t.Errorf("an id with a no-break space inside: %d %+v, want its key to be the id", code, a)
	}
}

// pmsSource is an unsigned source keyed by /event_id, or failing that by the booking
// and its status.
func pmsSource(t *testing.T) receiver.Source {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{Name: "pms", Verifier: v, TTL: time.Hour,
		Keys: receiver.KeySpec{EventID: []string{"/event_id"}, KeyFields: []string{"/booking_id", "/status"}}}
}
