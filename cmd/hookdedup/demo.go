package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// otaEvent is the shape of the demo's webhook payloads: what an online travel agency
// or channel manager sends about a booking.
type otaEvent struct {
	EventID       string    `json:"event_id"`
	Type          string    `json:"type"`
	OccurredAt    string    `json:"occurred_at"`
	PropertyID    string    `json:"property_id"`
	BookingID     string    `json:"booking_id"`
	Status        string    `json:"status"`
	EffectiveDate string    `json:"effective_date"`
	Channel       string    `json:"channel"`
	Guest         otaGuest  `json:"guest"`
	Stay          otaStay   `json:"stay"`
	Total         otaMoney  `json:"total"`
	Refund        *otaMoney `json:"refund,omitempty"`
}

type otaGuest struct {
	Name    string `json:"name"`
	Country string `json:"country"`
}

type otaStay struct {
	CheckIn  string `json:"check_in"`
	CheckOut string `json:"check_out"`
	RoomType string `json:"room_type"`
	Nights   int    `json:"nights"`
}

type otaMoney struct {
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

var (
	demoProperties = []string{"HTL-LIS-01", "HTL-POR-02", "HTL-FAO-03"}
	demoChannels   = []string{"booking.com", "expedia", "airbnb", "direct"}
	demoRooms      = []string{"DBL-STD", "DBL-SEA", "TWN-STD", "SUITE"}
	demoGuests     = []otaGuest{{"Ana Costa", "PT"}, {"Lena Vogel", "DE"}, {"Tom Baker", "GB"}, {"Chloé Martin", "FR"}, {"Mei Tanaka", "JP"}}
)

func money(cents int) json.Number { return json.Number(fmt.Sprintf("%d.%02d", cents/100, cents%100)) }

func randomID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// demoGen makes a believable stream: bookings, then modifications and cancellations of
// bookings it made.
type demoGen struct {
	rnd      *mrand.Rand
	bookings []otaEvent
	now      time.Time
}

func (g *demoGen) next() otaEvent {
	kind := g.rnd.IntN(10)
	if len(g.bookings) == 0 || kind < 5 {
		nights := 1 + g.rnd.IntN(6)
		in := g.now.AddDate(0, 0, 3+g.rnd.IntN(60))
		rate := 8000 + g.rnd.IntN(16000)
		e := otaEvent{
			Type:          "booking.created",
			PropertyID:    demoProperties[g.rnd.IntN(len(demoProperties))],
			BookingID:     fmt.Sprintf("BK-%s-%04d", g.now.Format("060102"), 1000+g.rnd.IntN(9000)),
			Status:        "confirmed",
			EffectiveDate: in.Format(time.DateOnly),
			Channel:       demoChannels[g.rnd.IntN(len(demoChannels))],
			Guest:         demoGuests[g.rnd.IntN(len(demoGuests))],
			Stay: otaStay{CheckIn: in.Format(time.DateOnly), CheckOut: in.AddDate(0, 0, nights).Format(time.DateOnly),
				RoomType: demoRooms[g.rnd.IntN(len(demoRooms))], Nights: nights},
			Total: otaMoney{money(rate * nights), "EUR"},
		}
		g.bookings = append(g.bookings, e)
		return g.stamp(e)
	}
	b := g.bookings[g.rnd.IntN(len(g.bookings))]
	if kind < 7 {
		b.Type, b.Status = "booking.modified", "modified"
		b.Stay.Nights++
		b.Stay.CheckOut = mustDate(b.Stay.CheckIn).AddDate(0, 0, b.Stay.Nights).Format(time.DateOnly)
		return g.stamp(b)
	}
	b.Type, b.Status = "booking.cancelled", "cancelled"
	total, _ := b.Total.Amount.Float64()
	b.Refund = &otaMoney{money(int(total*100) * (50 + g.rnd.IntN(51)) / 100), "EUR"}
	return g.stamp(b)
}

func (g *demoGen) stamp(e otaEvent) otaEvent {
	e.EventID = randomID("evt_")
	e.OccurredAt = g.now.UTC().Format(time.RFC3339)
	return e
}

func mustDate(s string) time.Time {
	t, _ := time.Parse(time.DateOnly, s)
	return t
}

func runDemo(ctx context.Context, args []string, e env) error {
	flags := newFlags("demo", e)
	target := flags.fs.String("url", "", "the server's base URL (default: http:// and the configured addr)")
	events := flags.fs.Int("events", 40, "how many distinct events to send")
	dupRate := flags.fs.Float64("duplicates", 0.3, "fraction of events delivered again")
	source := flags.fs.String("source", defaultSourceName, "the source to send as; its own secret signs")
	sender := flags.fs.String("provider", "", "send as this provider does, in its shape and signature, to a source configured with it (adyen, mews, stripe, …)")
	forensic := flags.fs.Bool("forensics", false, "send one double of each kind that transport deduplication cannot see (money mismatch, suspected duplicate, double refund, late duplicate) to the sources of --print-config")
	printConfig := flags.fs.Bool("print-config", false, "print the configuration --forensics sends to, with fresh secrets, and exit")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	meant := "--source"
	if len(pos) > 0 && (strings.HasPrefix(pos[0], "http://") || strings.HasPrefix(pos[0], "https://")) {
		meant = "--url"
	}
	if err := noArguments("demo", pos, meant); err != nil {
		return err
	}
	if err := demoUnusedFlag(flags.fs, *printConfig, *forensic); err != nil {
		return err
	}
	if *printConfig {
		_, err := io.WriteString(e.stdout, demoForensicsConfig())
		return err
	}
	if *events < 1 {
		return fmt.Errorf("--events %d: want 1 or more", *events)
	}
	// Written so that NaN, which no comparison holds for, is refused too.
	if !(*dupRate >= 0 && *dupRate <= 1) {
		return fmt.Errorf("--duplicates %v: want a fraction from 0 to 1 (0.3: three events in ten delivered again)", *dupRate)
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	if *sender != "" {
		named := ""
		flags.fs.Visit(func(f *flag.Flag) {
			if f.Name == "source" {
				named = *source
			}
		})
		return runProviderDemo(ctx, e, cfg, *sender, named, cmp.Or(*target, "http://"+cfg.Addr), *events, *dupRate)
	}
	sources, db, err := existingSources(ctx, cfg, e, true)
	if err != nil {
		return err
	}
	if db != nil {
		db.Close() // only the source's secret was wanted
	}
	src, err := findSource(sources, *source)
	if err != nil {
		return err
	}
	base := *target
	if base == "" {
		base = "http://" + cfg.Addr
	}
	if *forensic {
		return runForensicDemo(ctx, e, sources, base)
	}
	endpoint := strings.TrimRight(base, "/") + "/webhooks/" + url.PathEscape(src.Name)

	client := &http.Client{Timeout: 10 * time.Second}
	gen := &demoGen{rnd: mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 7)), now: time.Now()}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "#\tevent\tbooking\tdelivery\tanswer\tkey\n")
	counts := map[string]int{}
	n := 0
	send := func(ev otaEvent, id, what string) error {
		n++
		ans, err := demoSend(ctx, client, endpoint, src, ev, id)
		if err != nil {
			return err
		}
		counts[ans.Status]++
		result := ans.Status
		if ans.FirstDelivery != "" {
			result += " of " + ans.FirstDelivery
		}
		if ans.Error != "" {
			result = "rejected: " + ans.Error
			counts["rejected"]++
		}
		detail := ev.Type
		if ev.Refund != nil {
			detail += " refund " + string(ev.Refund.Amount) + " " + ev.Refund.Currency
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", n, detail, ev.BookingID, what, result, ans.Key)
		return nil
	}
	for range *events {
		ev := gen.next()
		id := randomID("msg_")
		if err := send(ev, id, "first"); err != nil {
			w.Flush()
			return err
		}
		if gen.rnd.Float64() >= *dupRate {
			continue
		}
		what := "redelivery"
		if gen.rnd.IntN(3) == 0 {
			// Same event id, different content: the provider re-sent a corrected
			// payload. hookdedup still calls it a duplicate, flagged as a mismatch.
			what = "redelivery, changed"
			if ev.Refund != nil {
				ev.Refund.Amount = money(int(mustFloat(ev.Refund.Amount)*100) + 1000)
			} else {
				ev.Guest.Name += " Jr."
			}
		}
		if err := send(ev, id, what); err != nil {
			w.Flush()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nsent %s to %s: %d accepted, %d duplicate, %d rejected\n",
		count(n, "delivery", "deliveries"), endpoint, counts["accepted"], counts["duplicate"], counts["rejected"])
	return demoRejected(counts["rejected"], src.Name)
}

// demoUnusedFlag refuses a flag of demo that the mode --print-config or --forensics
// leaves unused: run anyway, the demo would not be the one asked for (--print-config
// --forensics sends nothing, --forensics --provider stripe sends no Stripe traffic, and
// --events is not the count sent), and a script would take its exit status 0 for it.
func demoUnusedFlag(fs *flag.FlagSet, printConfig, forensic bool) error {
	var mode, does string
	var unused []string
	switch {
	case printConfig:
		mode, does = "--print-config", "it prints the forensic demo's configuration and sends nothing"
		unused = []string{"forensics", "provider", "source", "url", "events", "duplicates"}
	case forensic:
		mode, does = "--forensics", "it sends one delivery of each forensic flag to the sources of --print-config"
		unused = []string{"provider", "source", "events", "duplicates"}
	default:
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range unused {
		if set[name] {
			return fmt.Errorf("demo %s takes no --%s (%s): leave --%s out, or run the demo it belongs to on its own", mode, name, does, name)
		}
	}
	return nil
}

// demoRejected is the error of a demo whose deliveries to source were rejected, nil
// when none was. Every one is signed with the source's own secret and well formed, so
// a rejection says that the server is not the one this demo was set up for: a setup
// check or a smoke test that runs demo must not pass.
func demoRejected(rejected int, source string) error {
	if rejected == 0 {
		return nil
	}
	return fmt.Errorf("%s rejected (the answers above say why): a rejected signature means that the server does not run "+
		"with the secret of source %q that demo signed with; give demo the server's --config and --database",
		count(rejected, "delivery was", "deliveries were"), source)
}

func mustFloat(n json.Number) float64 {
	f, _ := n.Float64()
	return f
}

type demoAnswer struct {
	Status, Key, Delivery, FirstDelivery, Error string
}

// unreachable says that a demo's request found no server, its URL masked as everywhere
// hookdedup shows one: a token_query source's token travels in the query, and such
// errors are pasted into tickets.
func unreachable(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = &url.Error{Op: ue.Op, URL: web.RedactURL(ue.URL), Err: ue.Err}
	}
	return fmt.Errorf("is hookdedup serve running? %w", err)
}

// demoSend signs ev, as JSON, as the source's provider would and posts it; msgID goes
// in the event id header of a source that reads it from one.
func demoSend(ctx context.Context, client *http.Client, endpoint string, src receiver.Source, ev any, msgID string) (demoAnswer, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return demoAnswer{}, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	q := url.Values{}
	for _, from := range src.Keys.EventID {
		if name, ok := strings.CutPrefix(storage.PlacePointer(from), "header:"); ok {
			h.Set(name, msgID)
			break
		}
	}
	if err := src.Verifier.Sign(h, q, body, time.Now()); err != nil {
		return demoAnswer{}, fmt.Errorf("sign: %w", err)
	}
	u := endpoint
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return demoAnswer{}, err
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		return demoAnswer{}, unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return demoAnswer{}, err
	}
	var a struct {
		Status        string `json:"status"`
		Key           string `json:"key"`
		Delivery      string `json:"delivery"`
		FirstDelivery string `json:"first_delivery"`
		Error         string `json:"error"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return demoAnswer{}, fmt.Errorf("%s answered %s: %q", endpoint, resp.Status, raw)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return demoAnswer{}, fmt.Errorf("%s answered %s: %s", endpoint, resp.Status, a.Error)
	}
	return demoAnswer{a.Status, a.Key, a.Delivery, a.FirstDelivery, a.Error}, nil
}
