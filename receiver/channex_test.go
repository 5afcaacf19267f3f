package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// channexPresetSource is a source as `provider = "channex"` configures it.
func channexPresetSource(t *testing.T) receiver.Source {
	t.Helper()
	p, ok := provider.Lookup("channex")
	if !ok {
		t.Fatal("no channex preset")
	}
	v, err := signature.New(signature.Config{Scheme: p.Signature, TokenHeader: p.TokenHeader, Secrets: []string{"channex-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{Name: "channex", Verifier: v, TTL: p.TTL,
		Keys:          receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields},
		PropertyField: p.PropertyField, BookingField: p.BookingField, StatusField: p.StatusField}
}

func postChannex(t *testing.T, base, body string) (int, answer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/channex", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Webhook-Token", "channex-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, a
}

// A booking and a booking_new webhook of one revision, as Channex sends them: the revision
// as payload.revision_id in the first, payload.booking_revision_id in the second.
const (
	channexRevision = "80b3b60c-5e24-35c5-ad1b-da67cd704093"
	channexBooking  = `{"event":"booking","payload":{"booking_id":"e10de9d1-3e2c-431c-b88c-ffca9ed5db5d",` +
		`"property_id":"90958ec0-9713-1196-873e-4add0d834670","revision_id":"` + channexRevision + `"},` +
		`"property_id":"90958ec0-9713-1196-873e-4add0d834670","user_id":null,"timestamp":"2021-12-24T00:00:00.0000Z"}`
	channexBookingNew = `{"event":"booking_new","payload":{"booking_id":"e10de9d1-3e2c-431c-b88c-ffca9ed5db5d",` +
		`"property_id":"90958ec0-9713-1196-873e-4add0d834670","booking_revision_id":"` + channexRevision + `"},` +
		`"property_id":"90958ec0-9713-1196-873e-4add0d834670","user_id":null,"timestamp":"2021-12-24T00:00:00.0000Z"}`
)

// TestPresets_ChannexRevisionUnderEitherName: Channex's booking event carries the booking
// revision as payload.revision_id, its per-status events (booking_new, …) as
// payload.booking_revision_id (integrators' captures of booking_new). The preset
// reads either, so a booking and a booking_new webhook for one revision count once,
// rather than the second falling back to a key derived from its whole payload and being
// handed downstream again.
func TestPresets_ChannexRevisionUnderEitherName(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, channexPresetSource(t))
	const rev, booking, bookingNew = channexRevision, channexBooking, channexBookingNew

	code, a := postChannex(t, e.srv.URL, booking)
	if code != http.StatusOK || a.Status != "accepted" || a.Key != rev {
		t.Fatalf("booking: %d %+v, want accepted under the revision id %s", code, a, rev)
	}
	code, b := postChannex(t, e.srv.URL, bookingNew)
	if code != http.StatusOK {
		t.Fatalf("booking_new: %d %+v", code, b)
	}
	if b.Status != "duplicate" || b.Key != rev {
		t.Errorf("booking_new for revision %s: %s under key %q; want a duplicate of the booking webhook "+
			"(README: \"a booking and a booking_new webhook for the same revision therefore count once\")", rev, b.Status, b.Key)
	}
}

// TestPresets_ChannexBookingAndBookingNewNoMoneyMismatch: a webhook of every event gets a
// booking and a booking_new webhook for each new revision. Counted once, the second is
// a duplicate whose payload differs (the event's name, the revision's field name), and
// that is all: the event's name is no status, so the pair is no money mismatch, which
// would raise the money_mismatch alert for every revision.
func TestPresets_ChannexBookingAndBookingNewNoMoneyMismatch(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, channexPresetSource(t))
	const booking, bookingNew = channexBooking, channexBookingNew
	if code, a := postChannex(t, e.srv.URL, booking); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("booking: %d %+v", code, a)
	}
	code, b := postChannex(t, e.srv.URL, bookingNew)
	if code != http.StatusOK || b.Status != "duplicate" {
		t.Fatalf("booking_new: %d %+v, want a duplicate", code, b)
	}
	id, _ := strconv.ParseInt(b.Delivery, 10, 64)
	f, err := e.db.FlagsOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if f.MoneyMismatch || !d.Mismatch {
		t.Errorf("booking_new of the booking webhook's revision: money mismatch %v (status %q), mismatch %v; "+
			"want only a mismatch (its payload differs)", f.MoneyMismatch, d.EventStatus, d.Mismatch)
	}
}

// TestPresets_ChannexRevisionAlertsAreEventsOfTheirOwn: beside the booking webhook of a
// revision, Channex sends events of other kinds that name the same revision as
// payload.booking_revision_id: booking_unmapped_room (the booking came in on a room nobody
// mapped) and, 30 minutes on, non_acked_booking (the revision was never acknowledged).
// Each is accepted as an event of its own, keyed with its kind, not taken for a duplicate
// of the booking webhook; a redelivery of one is still a duplicate.
func TestPresets_ChannexRevisionAlertsAreEventsOfTheirOwn(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, channexPresetSource(t))
	if code, a := postChannex(t, e.srv.URL, channexBooking); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("booking: %d %+v", code, a)
	}
	for _, c := range []struct{ event, extra, ts string }{
		{"booking_unmapped_room", `,"ota_room_id":"R1"`, "2021-12-24T00:00:01.0000Z"},
		{"booking_unmapped_rate", `,"ota_rate_id":"BAR"`, "2021-12-24T00:00:01.0000Z"},
		{"non_acked_booking", ``, "2021-12-24T00:30:00.0000Z"},
	} {
		body := `{"event":"` + c.event + `","payload":{"booking_id":"e10de9d1-3e2c-431c-b88c-ffca9ed5db5d",` +
			`"property_id":"90958ec0-9713-1196-873e-4add0d834670","booking_revision_id":"` + channexRevision + `"` + c.extra + `},` +
			`"property_id":"90958ec0-9713-1196-873e-4add0d834670","user_id":null,"timestamp":"` + c.ts + `"}`
		code, a := postChannex(t, e.srv.URL, body)
		if code != http.StatusOK || a.Status != "accepted" {
			t.Errorf("%s for revision %s after its booking webhook: %d %s (key %q, first delivery %s); "+
				"want accepted: it is another event, not a redelivery of the booking webhook", c.event, channexRevision,
				code, a.Status, a.Key, a.FirstDelivery)
			continue
		}
		if code, again := postChannex(t, e.srv.URL, body); code != http.StatusOK || again.Status != "duplicate" || again.Key != a.Key {
			t.Errorf("%s sent again: %d %+v, want a duplicate under %s", c.event, code, again, a.Key)
		}
	}
}
