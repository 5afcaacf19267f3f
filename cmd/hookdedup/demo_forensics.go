package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// The forensic demo (`hookdedup demo --forensics`) sends the doubles that transport
// deduplication cannot see, one of each kind, to the sources of demoForensicsConfig:
// a money mismatch, a suspected duplicate (a cancellation re-sent under a new id), a
// suspected double refund (the same refund from the OTA and the payment provider) and
// a late duplicate (a redelivery after its key's short ttl has passed).

// The demo's sources, as demoForensicsConfig names them.
const (
	demoOTA      = "ota"
	demoPayments = "payments"
	demoChannel  = "channel"
	// demoChannelTTL is the channel source's ttl: short, so that the demo can wait for a
	// key to expire and show what a redelivery after that is.
	demoChannelTTL = 2 * time.Second
)

// demoForensicsConfig is the configuration the forensic demo needs, with fresh secrets:
// `hookdedup demo --print-config > hookdedup.toml`.
func demoForensicsConfig() string {
	secret := func(prefix string) string {
		b := make([]byte, 24)
		rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	key := base64.StdEncoding.EncodeToString(raw)
	return `# The sources and rules that ` + "`hookdedup demo --forensics`" + ` sends to.

[[source]]
name           = "ota"
signature      = "standard-webhooks"
secret         = "whsec_` + key + `"
event_id       = "header:webhook-id"
key_fields     = ["/property_id", "/booking_id", "/status", "/effective_date"]
amount_field   = "/refund/amount"
currency_field = "/refund/currency"
# The same cancellation re-sent under a new message id is a suspected duplicate.
business_key    = ["/property_id", "/booking_id", "/status", "/refund/amount"]
business_window = "336h"

[[source]]
name               = "payments"
signature          = "hmac-sha256"
signature_header   = "X-Signature"
signature_encoding = "hex"
secret             = "` + secret("") + `"
event_id           = "/id"
property_field     = "/metadata/property_id"
booking_field      = "/metadata/booking_id"
status_field       = "/type"
amount_field       = "/amount"
currency_field     = "/currency"
amount_minor_units = true

[[source]]
name               = "channel"
signature          = "hmac-sha256"
signature_header   = "X-Signature"
signature_encoding = "hex"
secret             = "` + secret("") + `"
event_id           = "/event_id"
amount_field       = "/refund/amount"
currency_field     = "/refund/currency"
# Short on purpose: the demo waits for a key to expire to show a late duplicate.
ttl                = "` + demoChannelTTL.String() + `"

# The same booking refunded with the same amount through the OTA and the payment
# provider within three days is a suspected double refund.
[[correlation]]
name   = "double-refund"
window = "72h"
  [[correlation.source]]
  name     = "ota"
  booking  = "/booking_id"
  amount   = "/refund/amount"
  currency = "/refund/currency"
  kind     = "/status"
  kinds    = ["cancelled"]
  [[correlation.source]]
  name               = "payments"
  booking            = "/metadata/booking_id"
  amount             = "/amount"
  currency           = "/currency"
  amount_minor_units = true
  kind               = "/type"
  kinds              = ["refund.created"]
`
}

// paymentEvent is the payment provider's refund, amounts in cents.
type paymentEvent struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Amount   int             `json:"amount"`
	Currency string          `json:"currency"`
	Metadata paymentMetadata `json:"metadata"`
}

type paymentMetadata struct {
	PropertyID string `json:"property_id"`
	BookingID  string `json:"booking_id"`
}

// runForensicDemo sends one double of each kind and prints what each delivery was
// answered.
func runForensicDemo(ctx context.Context, e env, sources []receiver.Source, base string) error {
	srcs := map[string]receiver.Source{}
	for _, name := range []string{demoOTA, demoPayments, demoChannel} {
		s, err := findSource(sources, name)
		if err != nil {
			return fmt.Errorf("--forensics needs the sources of `hookdedup demo --print-config`: %w", err)
		}
		srcs[name] = s
	}
	if len(srcs[demoOTA].BusinessKey) == 0 {
		return fmt.Errorf("--forensics: source %q has no business_key (see `hookdedup demo --print-config`)", demoOTA)
	}
	if len(srcs[demoOTA].Correlations) == 0 {
		return fmt.Errorf("--forensics: no [[correlation]] rule names source %q (see `hookdedup demo --print-config`)", demoOTA)
	}
	if ttl := srcs[demoChannel].TTL; ttl > time.Minute {
		return fmt.Errorf("--forensics: source %q has ttl %s; the demo waits for it to pass, so it must be a minute at most", demoChannel, ttl)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	endpoint := func(name string) string {
		return strings.TrimRight(base, "/") + "/webhooks/" + url.PathEscape(name)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "#\tsource\tevent\tbooking\tanswer\twhat it shows\n")
	n := 0
	send := func(name string, body any, msgID, event, booking, shows string) error {
		n++
		ans, err := demoSend(ctx, client, endpoint(name), srcs[name], body, msgID)
		if err != nil {
			return err
		}
		result := ans.Status
		if ans.FirstDelivery != "" {
			result += " of " + ans.FirstDelivery
		}
		if ans.Error != "" {
			return fmt.Errorf("%s refused delivery %d: %s", name, n, ans.Error)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", n, name, event, booking, result, shows)
		return nil
	}

	now := time.Now()
	booking := fmt.Sprintf("BK-%s-%04d", now.Format("060102"), now.Nanosecond()%10000)
	cancel := otaEvent{Type: "booking.cancelled", OccurredAt: now.UTC().Format(time.RFC3339), PropertyID: demoProperties[0],
		BookingID: booking, Status: "cancelled", EffectiveDate: now.AddDate(0, 0, 14).Format(time.DateOnly), Channel: "booking.com",
		Guest: demoGuests[0], Stay: otaStay{CheckIn: now.AddDate(0, 0, 14).Format(time.DateOnly),
			CheckOut: now.AddDate(0, 0, 17).Format(time.DateOnly), RoomType: "DBL-SEA", Nights: 3},
		Total: otaMoney{money(54000), "EUR"}, Refund: &otaMoney{money(27000), "EUR"}}
	cancel.EventID = randomID("evt_")
	first := randomID("msg_")
	steps := []struct {
		source      string
		body        any
		id, event   string
		shows       string
		beforeSleep bool
	}{
		{demoOTA, cancel, first, "booking.cancelled refund 270.00 EUR", "the first cancellation", false},
		{demoOTA, changedRefund(cancel, 28000), first, "booking.cancelled refund 280.00 EUR", "money mismatch: redelivered with another amount", false},
		{demoOTA, restamped(cancel), randomID("msg_"), "booking.cancelled refund 270.00 EUR", "suspected duplicate: the same cancellation under a new id", false},
		{demoPayments, paymentEvent{ID: randomID("re_"), Type: "refund.created", Amount: 27000, Currency: "eur",
			Metadata: paymentMetadata{PropertyID: cancel.PropertyID, BookingID: booking}},
			"", "refund.created 27000 eur", "suspected double refund: the OTA refunded it too", false},
	}
	for _, s := range steps {
		if err := send(s.source, s.body, s.id, s.event, booking, s.shows); err != nil {
			return err
		}
	}

	// A late duplicate: the channel manager re-sends an event after its key expired.
	late := cancel
	late.EventID = randomID("chn_")
	if err := send(demoChannel, late, "", "booking.cancelled refund 270.00 EUR", booking, "the channel manager's cancellation"); err != nil {
		return err
	}
	w.Flush()
	ttl := srcs[demoChannel].TTL
	fmt.Fprintf(e.stdout, "… waiting %s for its key to expire …\n", ttl)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(ttl + 100*time.Millisecond):
	}
	if err := send(demoChannel, late, "", "booking.cancelled refund 270.00 EUR", booking, "late duplicate: the same event after its key expired"); err != nil {
		return err
	}
	w.Flush()
	fmt.Fprintf(e.stdout, "\nsent %d deliveries: one money mismatch, one suspected duplicate, one suspected double refund, one late duplicate\n", n)
	return nil
}

func changedRefund(e otaEvent, cents int) otaEvent {
	r := *e.Refund
	r.Amount = money(cents)
	e.Refund = &r
	return e
}

// restamped is e as a sender re-sends it as a new message: a new event id and time.
func restamped(e otaEvent) otaEvent {
	e.EventID = randomID("evt_")
	e.OccurredAt = time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	return e
}
