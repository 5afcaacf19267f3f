package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// demoEvent is one event as a sender makes it: for a single-event sender, a request's
// body and the id headers it repeats on every delivery; for a batch sender, one element
// of the batch's array.
type demoEvent struct {
	label  string      // what the event is, as the demo prints it
	body   []byte      // the JSON
	header http.Header // id headers, kept by redeliveries
	form   bool        // sent as GitHub's form: payload=<JSON>
}

// senderDemo makes one sender's traffic in its documented shape.
type senderDemo struct {
	// event makes the next event: a whole request's body, or one element of a batch.
	event func(g *senderGen) demoEvent
	// wrap makes a batch request's body of its elements; nil for single-event senders.
	wrap func(g *senderGen, items []json.RawMessage) []byte
	// svix sends the standard-webhooks headers under Svix's names, as Svix-based
	// senders do.
	svix bool
}

// senderGen is the state the sender demos share: the random source, the time, and the
// payments and bookings made earlier, which later refunds and cancellations refer to.
type senderGen struct {
	rnd      *mrand.Rand
	now      time.Time
	seq      int
	payments []adyenNotification
}

func (g *senderGen) pick(s []string) string { return s[g.rnd.IntN(len(s))] }

// at is a moment for the next event, a little later than the last.
func (g *senderGen) at() time.Time {
	g.seq++
	return g.now.Add(time.Duration(g.seq) * 7 * time.Second).UTC()
}

func (g *senderGen) uuid() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ref is an uppercase alphanumeric reference of n characters, as Adyen's pspReference.
func (g *senderGen) ref(n int) string {
	const chars = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[g.rnd.IntN(len(chars))]
	}
	return string(b)
}

func (g *senderGen) booking() string {
	return fmt.Sprintf("BK-%s-%06d", g.now.Format("2006"), 100000+g.rnd.IntN(900000))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // maps, strings and numbers only
		panic(err)
	}
	return b
}

// demoMerchants are the demo's Adyen merchant accounts, one per currency: EUR and USD
// have two decimals, JPY none, so the amounts show the exponents at work.
var demoMerchants = []struct{ account, currency string }{
	{"HotelLisbonChiado", "EUR"}, {"HotelNewYorkSoho", "USD"}, {"HotelKyotoStation", "JPY"},
}

// adyenNotification is a NotificationRequestItem, its members as Adyen names them.
type adyenNotification struct {
	AdditionalData      map[string]string `json:"additionalData,omitempty"`
	Amount              adyenAmount       `json:"amount"`
	EventCode           string            `json:"eventCode"`
	EventDate           string            `json:"eventDate"`
	MerchantAccountCode string            `json:"merchantAccountCode"`
	MerchantReference   string            `json:"merchantReference"`
	OriginalReference   string            `json:"originalReference,omitempty"`
	PaymentMethod       string            `json:"paymentMethod"`
	PSPReference        string            `json:"pspReference"`
	Reason              string            `json:"reason"`
	Success             string            `json:"success"`
}

type adyenAmount struct {
	Currency string `json:"currency"`
	Value    int64  `json:"value"`
}

func minorLabel(value int64, currency string) string {
	major, _ := storage.MajorUnits(strconv.FormatInt(value, 10), currency, nil)
	return major + " " + currency
}

func adyenEvent(g *senderGen) demoEvent {
	n := adyenNotification{EventDate: g.at().Format(time.RFC3339), PSPReference: g.ref(16), Success: "true"}
	kind := g.rnd.IntN(10)
	if len(g.payments) == 0 || kind < 4 {
		m := demoMerchants[g.rnd.IntN(len(demoMerchants))]
		value := int64(8000 + g.rnd.IntN(52000))
		if m.currency != "JPY" {
			value = value / 10 * 10
		}
		n.EventCode, n.MerchantAccountCode, n.MerchantReference = "AUTHORISATION", m.account, g.booking()
		n.Amount = adyenAmount{m.currency, value}
		n.PaymentMethod = g.pick([]string{"visa", "mc", "amex"})
		n.AdditionalData = map[string]string{"authCode": strconv.Itoa(100000 + g.rnd.IntN(900000))}
		g.payments = append(g.payments, n)
	} else {
		// A payment is refunded or cancelled once, and then leaves the list.
		k := g.rnd.IntN(len(g.payments))
		p := g.payments[k]
		g.payments = slices.Delete(g.payments, k, k+1)
		n.MerchantAccountCode, n.MerchantReference, n.PaymentMethod = p.MerchantAccountCode, p.MerchantReference, p.PaymentMethod
		n.OriginalReference = p.PSPReference
		if kind < 8 {
			n.EventCode = "REFUND"
			n.Amount = adyenAmount{p.Amount.Currency, p.Amount.Value * int64(50+g.rnd.IntN(51)) / 100}
		} else {
			n.EventCode = "CANCELLATION"
			n.Amount = p.Amount
		}
	}
	return demoEvent{
		label: n.EventCode + " " + minorLabel(n.Amount.Value, n.Amount.Currency) + " " + n.MerchantReference,
		body:  mustJSON(map[string]any{"NotificationRequestItem": n}),
	}
}

func adyenWrap(_ *senderGen, items []json.RawMessage) []byte {
	return mustJSON(map[string]any{"live": "false", "notificationItems": items})
}

var mewsKinds = []string{"ServiceOrderUpdated", "ResourceUpdated", "CustomerAdded", "CustomerUpdated"}

// mewsEnterprise and mewsIntegration stand for the property and the integration that
// Mews names in every batch.
var (
	mewsEnterprise  = "2f7c8e3a-6d1b-4a59-9c0e-b4a3d2e1f5a7"
	mewsIntegration = "91e4c6b2-3a7d-4f08-8e5c-7d2b1a9c4e36"
)

func mewsEvent(g *senderGen) demoEvent {
	kind, id := g.pick(mewsKinds), g.uuid()
	return demoEvent{
		label: kind + " " + id,
		body:  mustJSON(map[string]any{"Discriminator": kind, "Value": map[string]string{"Id": id}}),
	}
}

func mewsWrap(_ *senderGen, items []json.RawMessage) []byte {
	return mustJSON(map[string]any{"EnterpriseId": mewsEnterprise, "IntegrationId": mewsIntegration, "Events": items})
}

func stripeEvent(g *senderGen) demoEvent {
	m := demoMerchants[g.rnd.IntN(len(demoMerchants))]
	amount := int64(8000 + g.rnd.IntN(52000))
	typ, refunded := "charge.succeeded", int64(0)
	if g.rnd.IntN(2) == 0 {
		typ, refunded = "charge.refunded", amount
	}
	at := g.at()
	id := "evt_" + g.ref(24)
	return demoEvent{
		label: typ + " " + minorLabel(amount, m.currency) + " " + id,
		body: mustJSON(map[string]any{
			"id": id, "object": "event", "api_version": "2024-06-20", "created": at.Unix(),
			"type": typ, "livemode": false, "pending_webhooks": 1,
			"data": map[string]any{"object": map[string]any{
				"id": "ch_" + g.ref(24), "object": "charge", "amount": amount, "amount_refunded": refunded,
				"currency": strings.ToLower(m.currency), "refunded": refunded > 0, "status": "succeeded",
				"metadata": map[string]string{"booking_id": g.booking(), "property_id": m.account},
			}},
		}),
	}
}

func channexEvent(g *senderGen) demoEvent {
	event := g.pick([]string{"booking", "booking_new", "booking_modification", "booking_cancellation"})
	property, booking, revision := g.uuid(), g.uuid(), g.uuid()
	// The booking event names the revision in revision_id, the events of one status in
	// booking_revision_id: the preset reads either.
	field := "booking_revision_id"
	if event == "booking" {
		field = "revision_id"
	}
	return demoEvent{
		label: event + " revision " + revision[:8],
		body: mustJSON(map[string]any{
			"event":       event,
			"payload":     map[string]string{"booking_id": booking, "property_id": property, field: revision},
			"property_id": property, "user_id": nil,
			"timestamp": g.at().Format("2006-01-02T15:04:05.000000Z"),
		}),
	}
}

func guestyEvent(g *senderGen) demoEvent {
	event, status := "reservation.new", "confirmed"
	if g.rnd.IntN(2) == 0 {
		event, status = "reservation.updated", g.pick([]string{"canceled", "confirmed"})
	}
	id := strings.ReplaceAll(g.uuid(), "-", "")[:24]
	msg := "msg_" + g.ref(27)
	return demoEvent{
		label:  event + " " + status + " " + id,
		body:   mustJSON(map[string]any{"event": event, "reservation": map[string]string{"_id": id, "status": status, "listingId": "64f2a9c1b7e3d5f0a2c4e681"}}),
		header: http.Header{"Webhook-Id": {msg}},
	}
}

func githubEvent(g *senderGen) demoEvent {
	action := g.pick([]string{"opened", "closed", "labeled"})
	number := 40 + g.rnd.IntN(900)
	body := mustJSON(map[string]any{
		"action":     action,
		"issue":      map[string]any{"id": 2817364509 + g.rnd.IntN(1000000), "number": number, "title": "Refund counted twice", "state": map[bool]string{true: "closed", false: "open"}[action == "closed"]},
		"repository": map[string]any{"id": 812736451, "full_name": "hotel-group/revenue-tools"},
		"sender":     map[string]string{"login": "revenue-manager"},
	})
	ev := demoEvent{
		label:  fmt.Sprintf("issues %s #%d", action, number),
		body:   body,
		header: http.Header{"X-Github-Delivery": {g.uuid()}, "X-Github-Event": {"issues"}, "User-Agent": {"GitHub-Hookshot/7f3c2a1"}},
		form:   g.rnd.IntN(3) == 0,
	}
	if ev.form {
		ev.label += " (form)"
	}
	return ev
}

func shopifyEvent(g *senderGen) demoEvent {
	m := demoMerchants[g.rnd.IntN(len(demoMerchants))]
	topic, status := "orders/create", "paid"
	if g.rnd.IntN(2) == 0 {
		topic, status = "orders/updated", "refunded"
	}
	cents := 1500 + g.rnd.IntN(40000)
	price := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	if m.currency == "JPY" {
		price = strconv.Itoa(cents)
	}
	order := 1000 + g.rnd.IntN(9000)
	return demoEvent{
		label: fmt.Sprintf("%s #%d %s %s", topic, order, price, m.currency),
		body: mustJSON(map[string]any{
			"id": 5798234170418 + g.rnd.IntN(1000000), "name": fmt.Sprintf("#%d", order), "currency": m.currency,
			"total_price": price, "financial_status": status,
			"line_items": []map[string]any{{"id": 14381720293682 + g.rnd.IntN(1000000), "title": "Spa voucher", "quantity": 1, "price": price}},
		}),
		header: http.Header{
			"X-Shopify-Webhook-Id": {g.uuid()}, "X-Shopify-Event-Id": {g.uuid()}, "X-Shopify-Topic": {topic},
			"X-Shopify-Shop-Domain": {"hotel-shop.myshopify.com"}, "X-Shopify-Api-Version": {"2025-01"},
		},
	}
}

func apaleoEvent(g *senderGen) demoEvent {
	typ := g.pick([]string{"created", "changed", "canceled"})
	entity := fmt.Sprintf("%s-1", g.ref(8))
	return demoEvent{
		label: "Reservation " + typ + " " + entity,
		body: mustJSON(map[string]any{
			"topic": "Reservation", "type": typ, "id": g.uuid(), "accountId": "HTLB", "propertyId": "HTLB-BER",
			"timestamp": g.at().UnixMilli(), "clientId": "HTLB-SP-REVENUEAPP", "subjectId": g.uuid(),
			"data": map[string]string{"entityId": entity},
		}),
	}
}

func cloudbedsEvent(g *senderGen) demoEvent {
	event, status := "reservation/created", "confirmed"
	if g.rnd.IntN(2) == 0 {
		event, status = "reservation/status_changed", g.pick([]string{"canceled", "checked_in"})
	}
	reservation := strconv.Itoa(7319250000000 + g.rnd.IntN(999999))
	return demoEvent{
		label: event + " " + status + " " + reservation,
		body: mustJSON(map[string]any{
			"version": "1.0", "event": event, "timestamp": float64(g.at().UnixMilli()) / 1000,
			"propertyID": 204817, "reservationID": reservation, "status": status,
		}),
	}
}

func beds24Event(g *senderGen) demoEvent {
	room := strconv.Itoa(412000 + g.rnd.IntN(1000) + 1000*g.seq)
	g.seq++
	return demoEvent{
		label: "SYNC_ROOM room " + room,
		body:  mustJSON(map[string]string{"roomId": room, "propId": "98213", "ownerId": "55021", "action": "SYNC_ROOM"}),
	}
}

// senderDemos holds a demo for every preset (a test keeps them in step).
var senderDemos = map[string]senderDemo{
	"adyen":     {event: adyenEvent, wrap: adyenWrap},
	"apaleo":    {event: apaleoEvent},
	"beds24":    {event: beds24Event},
	"channex":   {event: channexEvent},
	"cloudbeds": {event: cloudbedsEvent},
	"github":    {event: githubEvent},
	"guesty":    {event: guestyEvent, svix: true},
	"mews":      {event: mewsEvent, wrap: mewsWrap},
	"shopify":   {event: shopifyEvent},
	"stripe":    {event: stripeEvent},
}

// demoSource picks the source a provider demo sends to: the one --source names (whose
// provider, if it has one, must be name), else the first whose provider is name, else
// one called name. It returns the source's index in both slices.
func demoSource(cfg config, sources []receiver.Source, name, source string) (int, error) {
	if source != "" {
		for i, s := range sources {
			if s.Name != source {
				continue
			}
			if p := cfg.Sources[i].Provider; p != "" && p != name {
				return 0, fmt.Errorf("source %q has provider %q, not %q: name a source configured with provider = %q",
					source, p, name, name)
			}
			return i, nil
		}
		_, err := findSource(sources, source)
		return 0, err
	}
	for i := range sources {
		if cfg.Sources[i].Provider == name {
			return i, nil
		}
	}
	for i, s := range sources {
		if s.Name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no source has provider = %q and none is named %q: add one to %s, such as\n\n"+
		"[[source]]\nname     = %q\nprovider = %q\nsecret   = \"...\"\n\nor name one with --source",
		name, name, cmp.Or(cfg.File, defaultConfigFile), name, name)
}

// providerDemo is a running `demo --provider`.
type providerDemo struct {
	sender   senderDemo
	src      receiver.Source
	adyen    *signature.AdyenHMAC // the adyen scheme's signer, nil for other schemes
	endpoint string
	client   *http.Client
	db       storage.Store // for the outcome of each item when the answer names none; may be nil
	w        *tabwriter.Writer
	n        int
	counts   map[string]int
}

// runProviderDemo sends events of the sender that provider names to the source it picks.
func runProviderDemo(ctx context.Context, e env, cfg config, name, source, base string, events int, dupRate float64) error {
	if _, err := provider.Resolve(name); err != nil {
		return fmt.Errorf("--provider %w", err)
	}
	sender, ok := senderDemos[name]
	if !ok {
		return fmt.Errorf("--provider %q: the demo has no traffic for it", name)
	}
	sources, db, err := existingSources(ctx, cfg, e, true)
	if err != nil {
		return err
	}
	i, err := demoSource(cfg, sources, name, source)
	if err != nil {
		if db != nil {
			db.Close()
		}
		return err
	}
	d := &providerDemo{sender: sender, src: sources[i], client: &http.Client{Timeout: 10 * time.Second}, counts: map[string]int{}}
	if d.src.Verifier.Scheme() == "adyen" {
		s, err := readSource(cfg.Sources[i], e.getenv, func(string) (string, error) {
			return "", errors.New("an adyen source needs its HMAC key in secret or secret_env")
		})
		if err != nil {
			return err
		}
		if d.adyen, err = signature.NewAdyenHMAC(s.secrets[:1]); err != nil {
			return fmt.Errorf("source %q: %w", d.src.Name, err)
		}
	}
	if d.src.Answer == receiver.AnswerAccepted && d.src.Batch != "" && db == nil {
		// The answer says only "[accepted]": each item's outcome is read from the
		// database, when this machine has it.
		db, _ = openExisting(ctx, cfg, e)
	}
	if db != nil {
		defer db.Close()
	}
	d.db = db
	d.endpoint = strings.TrimRight(base, "/") + "/webhooks/" + url.PathEscape(d.src.Name)

	g := &senderGen{rnd: mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 11)), now: time.Now()}
	d.w = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(d.w, "#\tsent\tdelivery\tanswer\tkey\n")
	if sender.wrap != nil {
		err = d.batches(ctx, g, events, dupRate)
	} else {
		err = d.singles(ctx, g, events, dupRate)
	}
	if ferr := d.w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	sent := count(d.n, "delivery", "deliveries")
	if sender.wrap != nil {
		sent = count(d.n, "batched request", "batched requests")
	}
	fmt.Fprintf(e.stdout, "\nsent %s as %s to %s: %d accepted, %d duplicate, %d rejected\n",
		sent, name, d.endpoint, d.counts["accepted"], d.counts["duplicate"], d.counts["rejected"])
	return demoRejected(d.counts["rejected"], d.src.Name)
}

// singles sends events one per request; a share of them is delivered again, and at
// least one, so that every run shows a duplicate.
func (d *providerDemo) singles(ctx context.Context, g *senderGen, events int, dupRate float64) error {
	redelivered := false
	for k := range events {
		ev := d.sender.event(g)
		if err := d.sendOne(ctx, ev, "first"); err != nil {
			return err
		}
		if g.rnd.Float64() < dupRate || (!redelivered && k == events-1) {
			redelivered = true
			if err := d.sendOne(ctx, ev, "redelivery"); err != nil {
				return err
			}
		}
	}
	return nil
}

// batches sends events in batches of one to three; a share of the batches is
// delivered again, some with one new event added. The first is always delivered again
// with one new event (when there is one to add), so that every run shows a request
// whose items are accepted and duplicate at once.
func (d *providerDemo) batches(ctx context.Context, g *senderGen, events int, dupRate float64) error {
	made, addedOne, redelivered := 0, false, false
	for made < events {
		size := min(1+g.rnd.IntN(3), events-made)
		if !addedOne && events-made > 1 {
			size = min(size, events-made-1) // leave one to add to its redelivery
		}
		batch := make([]demoEvent, size)
		for i := range batch {
			batch[i] = d.sender.event(g)
		}
		made += size
		if err := d.sendBatch(ctx, g, batch, "first"); err != nil {
			return err
		}
		switch {
		case !addedOne && made < events, made < events && g.rnd.Float64() < dupRate/2:
			addedOne, redelivered = true, true
			made++
			if err := d.sendBatch(ctx, g, append(batch, d.sender.event(g)), "redelivery + 1 new"); err != nil {
				return err
			}
		case g.rnd.Float64() < dupRate || (!redelivered && made >= events):
			redelivered = true
			if err := d.sendBatch(ctx, g, batch, "redelivery"); err != nil {
				return err
			}
		}
	}
	return nil
}

// request builds a delivery of body with the event's id headers, signed as the sender
// signs it now.
func (d *providerDemo) request(ctx context.Context, ev demoEvent, body []byte) (*http.Request, error) {
	h := ev.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	if ev.form {
		body = []byte("payload=" + url.QueryEscape(string(body)))
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	q := url.Values{}
	if d.adyen != nil {
		signed, err := d.adyen.SignNotification(body)
		if err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		body = signed
	} else if err := d.src.Verifier.Sign(h, q, body, time.Now()); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if d.sender.svix && h.Get("Webhook-Signature") != "" {
		for _, part := range []string{"Id", "Timestamp", "Signature"} {
			h.Set("Svix-"+part, h.Get("Webhook-"+part))
			h.Del("Webhook-" + part)
		}
	}
	u := d.endpoint
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	return req, nil
}

// demoReply is what hookdedup answered: one delivery's result, a batch's results, or
// Adyen's "[accepted]".
type demoReply struct {
	code     int
	accepted bool // the body was [accepted]
	one      itemReply
	items    []itemReply
	batch    string
}

type itemReply struct {
	Index         int    `json:"index"`
	Status        string `json:"status"`
	Key           string `json:"key"`
	Delivery      string `json:"delivery"`
	FirstDelivery string `json:"first_delivery"`
	Mismatch      bool   `json:"mismatch"`
	Error         string `json:"error"`
}

func (d *providerDemo) post(req *http.Request) (demoReply, error) {
	resp, err := d.client.Do(req)
	if err != nil {
		return demoReply{}, unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return demoReply{}, err
	}
	r := demoReply{code: resp.StatusCode}
	if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(raw)) == "[accepted]" {
		r.accepted = true
		return r, nil
	}
	var a struct {
		itemReply
		Batch string      `json:"batch"`
		Items []itemReply `json:"items"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return r, fmt.Errorf("%s answered %s: %.200q", d.endpoint, resp.Status, raw)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return r, fmt.Errorf("%s answered %s: %s", d.endpoint, resp.Status, a.Error)
	}
	r.one, r.items, r.batch = a.itemReply, a.Items, a.Batch
	if resp.StatusCode != http.StatusOK && r.one.Error == "" {
		r.one.Error = resp.Status
	}
	return r, nil
}

// result says what one answer means, and counts it.
func (d *providerDemo) result(it itemReply) string {
	if it.Error != "" {
		d.counts["rejected"]++
		return "rejected: " + it.Error
	}
	d.counts[it.Status]++
	s := it.Status
	if it.FirstDelivery != "" {
		s += " of " + it.FirstDelivery
	}
	if it.Mismatch {
		s += " (mismatch)"
	}
	return s
}

func (d *providerDemo) sendOne(ctx context.Context, ev demoEvent, what string) error {
	req, err := d.request(ctx, ev, ev.body)
	if err != nil {
		return err
	}
	r, err := d.post(req)
	if err != nil {
		return err
	}
	d.n++
	answer := d.result(r.one)
	if r.accepted {
		answer = "[accepted]"
	}
	fmt.Fprintf(d.w, "%d\t%s\t%s\t%s\t%s\n", d.n, ev.label, what, answer, r.one.Key)
	return nil
}

func (d *providerDemo) sendBatch(ctx context.Context, g *senderGen, batch []demoEvent, what string) error {
	elems := make([]json.RawMessage, len(batch))
	for i, ev := range batch {
		elems[i] = ev.body
	}
	req, err := d.request(ctx, demoEvent{}, d.sender.wrap(g, elems))
	if err != nil {
		return err
	}
	body, _ := req.GetBody()
	sent, _ := io.ReadAll(body)
	r, err := d.post(req)
	if err != nil {
		return err
	}
	d.n++
	items := r.items
	head := fmt.Sprintf("batch %s", r.batch)
	switch {
	case r.accepted:
		head = "[accepted]"
		items = d.storedOutcomes(ctx, sent)
	case r.one.Error != "":
		head = d.result(r.one)
		items = nil
	}
	fmt.Fprintf(d.w, "%d\tbatch of %d\t%s\t%s\t\n", d.n, len(batch), what, head)
	for i, ev := range batch {
		if i >= len(items) {
			if r.one.Error == "" {
				fmt.Fprintf(d.w, "\t  item %d: %s\t\t(the answer names no item; run the demo where the database is to see each)\t\n", i, ev.label)
			}
			continue
		}
		fmt.Fprintf(d.w, "\t  item %d: %s\t\t%s\t%s\n", i, ev.label, d.result(items[i]), items[i].Key)
	}
	return nil
}

// storedOutcomes reads the outcome of each item of a batch that was answered
// "[accepted]": the latest stored delivery of the item's key, which is this request's
// (the demo sends one request at a time). It returns nil without a database.
func (d *providerDemo) storedOutcomes(ctx context.Context, body []byte) []itemReply {
	if d.db == nil {
		return nil
	}
	items, _, err := receiver.SplitBatch(body, d.src.Batch, d.src.Item, d.src.MaxBatchItems)
	if err != nil {
		return nil
	}
	out := make([]itemReply, 0, len(items))
	for i, item := range items {
		der, err := receiver.Derive(d.src.Keys, nil, item)
		if err != nil {
			return out
		}
		ds, err := d.db.KeyDeliveries(ctx, d.src.Name, der.Key)
		if err != nil || len(ds) == 0 {
			return out
		}
		last := ds[len(ds)-1]
		it := itemReply{Index: i, Status: string(last.Outcome), Key: der.Key, Delivery: strconv.FormatInt(last.ID, 10), Mismatch: last.Mismatch}
		if last.Outcome == storage.Duplicate {
			it.FirstDelivery = strconv.FormatInt(last.FirstDelivery, 10)
		}
		out = append(out, it)
	}
	return out
}
