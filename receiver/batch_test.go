package receiver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// adyenKey is an HMAC key as Adyen's Customer Area shows it.
const adyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

func adyenSource(t testing.TB) receiver.Source {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "adyen", Secrets: []string{adyenKey}})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{
		Name:     "adyen",
		Verifier: v,
		Keys:     receiver.KeySpec{KeyFields: []string{"/merchantAccountCode", "/pspReference", "/eventCode", "/success"}},
		TTL:      24 * time.Hour,
		Batch:    "/notificationItems",
		Item:     "/NotificationRequestItem",

		PropertyField: "/merchantAccountCode", BookingField: "/merchantReference", StatusField: "/eventCode",
		AmountField: []string{"/amount/value"}, CurrencyField: "/amount/currency", AmountMinorUnits: true,
	}
}

// adyenItem is one signed NotificationRequestItem, indented as a sender might write
// it, so that a test can tell the sender's bytes from a re-encoding.
func adyenItem(t testing.TB, psp, event string, value int) []byte {
	t.Helper()
	a, err := signature.NewAdyenHMAC([]string{adyenKey})
	if err != nil {
		t.Fatal(err)
	}
	item := fmt.Appendf(nil, `{"amount":{"currency":"EUR","value":%d},"eventCode":%q,"merchantAccountCode":"HotelBerlinMitte",`+
		`"merchantReference":"BK-%s","originalReference":"","pspReference":%q,"success":"true"}`, value, event, psp, psp)
	signed, err := a.SignItem(item)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, signed, "      ", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// adyenBody wraps items as Adyen's notification webhook does.
func adyenBody(items ...[]byte) string {
	var b strings.Builder
	b.WriteString("{\n  \"live\": \"false\",\n  \"notificationItems\": [\n")
	for i, item := range items {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("    {\"NotificationRequestItem\": ")
		b.Write(item)
		b.WriteString("}")
	}
	b.WriteString("\n  ]\n}")
	return b.String()
}

type batchAnswer struct {
	Status string `json:"status"`
	Batch  string `json:"batch"`
	Error  string `json:"error"`
	Items  []struct {
		Index         int    `json:"index"`
		Status        string `json:"status"`
		Key           string `json:"key"`
		Delivery      string `json:"delivery"`
		FirstDelivery string `json:"first_delivery"`
	} `json:"items"`
}

// postBatch sends body to source as is (a batch carries its signatures inside, or a
// token in the query) and returns the status and the decoded answer.
func postBatch(t testing.TB, base, path, body string) (int, batchAnswer) {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a batchAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, a
}

func outcomes(a batchAnswer) string {
	var s []string
	for _, it := range a.Items {
		s = append(s, it.Status)
	}
	return strings.Join(s, ",")
}

func TestBatch_Adyen(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	refund := adyenItem(t, "Z4HB8C2D6F1G9J3K", "REFUND", 41250)
	capture := adyenItem(t, "W2LM6N4P8Q1R5S7T", "CAPTURE", 18000)

	code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(refund, capture))
	if code != http.StatusOK || a.Status != "batch" || outcomes(a) != "accepted,accepted" {
		t.Fatalf("first delivery: %d %+v, want 200 with two accepted items", code, a)
	}
	if a.Batch != a.Items[0].Delivery {
		t.Errorf("batch %q, want the first item's delivery %q", a.Batch, a.Items[0].Delivery)
	}
	for i, want := range [][]byte{refund, capture} {
		var id int64
		fmt.Sscan(a.Items[i].Delivery, &id)
		d, err := e.db.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Body, want) {
			t.Errorf("item %d stored as %q, want the sender's bytes %q", i, d.Body, want)
		}
		if fmt.Sprint(d.Batch) != a.Batch || d.BatchIndex != i {
			t.Errorf("item %d stored with batch %d index %d, want %s and %d", i, d.Batch, d.BatchIndex, a.Batch, i)
		}
		if d.Key != a.Items[i].Key || !strings.HasPrefix(d.Key, "derived:") {
			t.Errorf("item %d key %q, answered %q", i, d.Key, a.Items[i].Key)
		}
		// Each item's money in its own currency, in major units, as a single delivery's.
		if d.Amount != []string{"412.50", "180.00"}[i] || d.Currency != "EUR" {
			t.Errorf("item %d money %q %q, want its own amount in EUR major units", i, d.Amount, d.Currency)
		}
		if d.EventStatus != []string{"REFUND", "CAPTURE"}[i] || d.Property != "HotelBerlinMitte" {
			t.Errorf("item %d labelled %q/%q, want its own fields", i, d.Property, d.EventStatus)
		}
		if hasHeaders := len(d.Headers) > 0; hasHeaders != (i == 0) {
			t.Errorf("item %d has headers: %v; the request's headers go with the first item only", i, hasHeaders)
		}
	}

	t.Run("RedeliveredWithOneNew", func(t *testing.T) {
		cancel := adyenItem(t, "K9P3Q7R1S5T2V8W4", "CANCELLATION", 41250)
		code, again := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(refund, cancel, capture))
		if code != http.StatusOK || outcomes(again) != "duplicate,accepted,duplicate" {
			t.Fatalf("redelivery: %d %+v, want the new item accepted, the others duplicates", code, again)
		}
		if again.Items[0].FirstDelivery != a.Items[0].Delivery || again.Items[2].FirstDelivery != a.Items[1].Delivery {
			t.Errorf("duplicates name %q and %q, want %q and %q", again.Items[0].FirstDelivery,
				again.Items[2].FirstDelivery, a.Items[0].Delivery, a.Items[1].Delivery)
		}
	})

	t.Run("SameKeyTwiceInOneRequest", func(t *testing.T) {
		twice := adyenItem(t, "T1T2T3T4T5T6T7T8", "REFUND", 500)
		code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(twice, twice))
		if code != http.StatusOK || outcomes(a) != "accepted,duplicate" || a.Items[1].FirstDelivery != a.Items[0].Delivery {
			t.Fatalf("%d %+v, want the first accepted and the second its duplicate", code, a)
		}
	})
}

// countRows counts the deliveries of source by outcome, and its claims.
func countRows(t *testing.T, db *sqlite.DB, source string) (map[string]int, int) {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	out := map[string]int{}
	rows, err := raw.Query(`SELECT outcome, count(*) FROM deliveries WHERE source = ? GROUP BY outcome`, source)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		out[o] = n
	}
	rows.Close()
	var claims int
	if err := raw.QueryRow(`SELECT count(*) FROM claims WHERE source = ?`, source).Scan(&claims); err != nil {
		t.Fatal(err)
	}
	return out, claims
}

// TestBatch_AllOrNothing: one bad item refuses the whole request, naming the item, and
// claims nothing, so that the sender's retry presents the batch whole again.
func TestBatch_AllOrNothing(t *testing.T) {
	good1 := adyenItem(t, "A1A1A1A1A1A1A1A1", "REFUND", 100)
	good2 := adyenItem(t, "B2B2B2B2B2B2B2B2", "REFUND", 200)

	t.Run("TamperedItem", func(t *testing.T) {
		e := newEnv(t, sqlite.Options{}, adyenSource(t))
		tampered := bytes.Replace(adyenItem(t, "C3C3C3C3C3C3C3C3", "REFUND", 300), []byte(`300`), []byte(`30000`), 1)
		code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(good1, good2, tampered))
		if code != http.StatusUnauthorized || !strings.HasPrefix(a.Error, "item 2: signature: ") {
			t.Fatalf("%d %q, want 401 naming item 2's signature", code, a.Error)
		}
		got, claims := countRows(t, e.db, "adyen")
		if got["accepted"] != 0 || got["duplicate"] != 0 || claims != 0 {
			t.Fatalf("stored %v and %d claims, want nothing but the rejection", got, claims)
		}
		// The sender's retry, fixed, is taken whole.
		code, a = postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(good1, good2))
		if code != http.StatusOK || outcomes(a) != "accepted,accepted" {
			t.Fatalf("retry: %d %+v, want both accepted", code, a)
		}
	})

	t.Run("ItemWithoutKey", func(t *testing.T) {
		src := adyenSource(t)
		src.Keys = receiver.KeySpec{EventID: []string{"/pspReference"}}
		e := newEnv(t, sqlite.Options{}, src)
		a, err := signature.NewAdyenHMAC([]string{adyenKey})
		if err != nil {
			t.Fatal(err)
		}
		nokey, err := a.SignItem([]byte(`{"eventCode":"REPORT_AVAILABLE","success":"true"}`))
		if err != nil {
			t.Fatal(err)
		}
		code, ans := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(good1, nokey, good2))
		if code != http.StatusUnprocessableEntity || !strings.HasPrefix(ans.Error, "item 1: no idempotency key") {
			t.Fatalf("%d %q, want 422 naming item 1", code, ans.Error)
		}
		got, claims := countRows(t, e.db, "adyen")
		if got["accepted"] != 0 || claims != 0 || got["rejected"] != 1 {
			t.Fatalf("stored %v and %d claims, want one rejection only", got, claims)
		}
	})

	t.Run("TooManyItems", func(t *testing.T) {
		src := adyenSource(t)
		src.MaxBatchItems = 2
		e := newEnv(t, sqlite.Options{}, src)
		code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(good1, good2, good1))
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(a.Error, "3 items, more than max_batch_items (2)") {
			t.Fatalf("%d %q, want 413 naming the count and the limit", code, a.Error)
		}
	})

	t.Run("NotABatch", func(t *testing.T) {
		e := newEnv(t, sqlite.Options{}, adyenSource(t))
		for body, want := range map[string]string{
			`{"notificationItems": {}}`:         `the batch "/notificationItems" is a JSON object, not an array`,
			`{"notificationItems": []}`:         `the batch "/notificationItems" is empty`,
			`{"live": "false"}`:                 `the batch "/notificationItems" is absent`,
			`{"notificationItems": [{"x": 1}]}`: `item 0: "/NotificationRequestItem" is absent`,
			`{"notificationItems": [5]}`:        `item 0 is a JSON number, not an object holding "/NotificationRequestItem"`,
			`{"notificationItems": ["x"]}`:      `item 0 is a JSON string, not an object holding "/NotificationRequestItem"`,
		} {
			code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", body)
			if code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, want) {
				t.Errorf("%s: %d %q, want 422 saying %s", body, code, a.Error, want)
			}
		}
		code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", `{"notificationItems": [`)
		if code != http.StatusBadRequest {
			t.Errorf("broken JSON: %d %q, want 400", code, a.Error)
		}
	})
}

// TestBatch_ConcurrentRedeliveries sends one batch 200 times at once: each item must be
// accepted exactly once over all the answers, and every answer is a 200.
func TestBatch_ConcurrentRedeliveries(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	var items [][]byte
	for i := range 5 {
		items = append(items, adyenItem(t, fmt.Sprintf("P%015d", i), "REFUND", 100+i))
	}
	body := adyenBody(items...)
	const n = 200
	var mu sync.Mutex
	accepted := make([]int, len(items))
	codes := map[int]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", body)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			for _, it := range a.Items {
				if it.Status == "accepted" {
					accepted[it.Index]++
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if codes[http.StatusOK] != n {
		t.Fatalf("answers %v, want %d 200s", codes, n)
	}
	for i, c := range accepted {
		if c != 1 {
			t.Errorf("item %d accepted %d times, want once", i, c)
		}
	}
	got, claims := countRows(t, e.db, "adyen")
	if got["accepted"] != len(items) || got["duplicate"] != (n-1)*len(items) || claims != len(items) {
		t.Fatalf("stored %v and %d claims, want %d accepted, %d duplicates, %d claims",
			got, claims, len(items), (n-1)*len(items), len(items))
	}
}

// TestBatch_Mews: thin events in Events, a token in the URL, each event keyed on its
// whole self (Discriminator and Value), so that two kinds of event about one entity are
// two events.
func TestBatch_Mews(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"mews-url-token-1"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}, StatusField: "/Discriminator"}
	e := newEnv(t, sqlite.Options{}, src)
	body := `{"EnterpriseId":"2f7c8e3a","Events":[` +
		`{"Discriminator":"CustomerAdded","Value":{"Id":"a5c7e9b1"}},` +
		`{"Discriminator":"CustomerUpdated","Value":{"Id":"a5c7e9b1"}}]}`
	code, a := postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url-token-1", body)
	if code != http.StatusOK || outcomes(a) != "accepted,accepted" || a.Items[0].Key == a.Items[1].Key {
		t.Fatalf("%d %+v, want two accepted items with keys of their own", code, a)
	}
	code, a = postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url-token-1", body)
	if code != http.StatusOK || outcomes(a) != "duplicate,duplicate" {
		t.Fatalf("redelivery: %d %+v, want both duplicates", code, a)
	}
	code, a = postBatch(t, e.srv.URL, "/webhooks/mews?token=wrong", body)
	if code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %q, want 401", code, a.Error)
	}
	// The right token, in a query Go refuses to split at its semicolon: refused, saying
	// why the token was not read, not that there is none.
	code, a = postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url-token-1;x=1", body)
	if want := "signature: missing query parameter token (the query string could not be decoded: invalid semicolon separator in query)"; code != http.StatusUnauthorized || a.Error != want {
		t.Fatalf("a semicolon in the query: %d %q, want 401 %q", code, a.Error, want)
	}
	// A broken escape: said, without quoting the bytes after the '%' (a token's).
	code, a = postBatch(t, e.srv.URL, "/webhooks/mews?token=mews-url%zq-token-1", body)
	if want := "signature: missing query parameter token (the query string could not be decoded: a % not followed by two hex digits)"; code != http.StatusUnauthorized || a.Error != want {
		t.Fatalf("a broken escape in the query: %d %q, want 401 %q", code, a.Error, want)
	}
}

// TestBatch_FormBody: a form posted to a batched source is refused as not JSON, saying
// that the Content-Type is a form and that a batched source takes JSON.
func TestBatch_FormBody(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"mews-url-token-1"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}}
	e := newEnv(t, sqlite.Options{}, src)
	form := "payload=" + url.QueryEscape(`{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5c7e9b1"}}]}`)
	resp, err := http.Post(e.srv.URL+"/webhooks/mews?token=mews-url-token-1", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "not valid JSON") ||
		!strings.Contains(string(got), "a batched source takes a JSON body") {
		t.Fatalf("a form to a batched source: %d %s; want 400 saying the form is not taken", resp.StatusCode, got)
	}
}

// TestBatch_MewsBase64Token: a token_query secret made with `openssl rand -base64 32`
// holds '+', '/' and '=': the URL the operator gives the sender verifies whether the
// token is written into it as it is (its '+' read back as spaces) or percent-encoded.
func TestBatch_MewsBase64Token(t *testing.T) {
	const token = "q8Zr+4mW/Lk2v7Xn+TtA1pY9cE3sH6uJ0oR5fB8dG2w="
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}}
	e := newEnv(t, sqlite.Options{}, src)
	body := `{"EnterpriseId":"2f7c8e3a","Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5c7e9b1"}}]}`
	for _, query := range []string{"token=" + token, url.Values{"token": {token}}.Encode()} {
		if code, a := postBatch(t, e.srv.URL, "/webhooks/mews?"+query, body); code != http.StatusOK {
			t.Errorf("the source's own token in the URL as ?%s: %d %q, want it verified", query, code, a.Error)
		}
	}
	if code, _ := postBatch(t, e.srv.URL, "/webhooks/mews?token="+strings.Replace(token, "+", "-", 1), body); code != http.StatusUnauthorized {
		t.Errorf("another token: %d, want 401", code)
	}
}

// TestBatch_Dispatch: each accepted item goes downstream on its own, with its own
// bytes, its own Idempotency-Key and the batch it came in.
func TestBatch_Dispatch(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	src := adyenSource(t)
	src.ForwardURL, src.MaxAttempts, src.AttemptTimeout, src.MaxBackoff = ds.srv.URL, 3, time.Second, time.Second
	e := newEnv(t, sqlite.Options{}, src)
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: e.db, Sources: []receiver.Source{src},
		FirstBackoff: 40 * time.Millisecond, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	items := [][]byte{adyenItem(t, "D1D1D1D1D1D1D1D1", "REFUND", 1), adyenItem(t, "D2D2D2D2D2D2D2D2", "REFUND", 2)}
	code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(items...))
	if code != http.StatusOK {
		t.Fatalf("%d %+v", code, a)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ds.received()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("downstream received %v after 10s, want two items", ds.received())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for i, h := range ds.headers {
		idx := -1
		for j, it := range a.Items {
			if h.Get("Idempotency-Key") == "adyen:"+it.Key {
				idx = j
			}
		}
		if idx < 0 {
			t.Fatalf("downstream got Idempotency-Key %q, not one of the items'", h.Get("Idempotency-Key"))
		}
		if ds.bodies[i] != string(items[idx]) {
			t.Errorf("item %d sent as %q, want its own bytes %q", idx, ds.bodies[i], items[idx])
		}
		if h.Get("X-Hookdedup-Batch") != a.Batch || h.Get("X-Hookdedup-Batch-Index") != fmt.Sprint(idx) {
			t.Errorf("item %d sent with batch %q index %q, want %s and %d", idx,
				h.Get("X-Hookdedup-Batch"), h.Get("X-Hookdedup-Batch-Index"), a.Batch, idx)
		}
	}
}

// Adyen signs success as the text "true" or "false", and the key holds the JSON value:
// a replay of a captured item with "success":"true" respelled as the boolean true must
// not pass the signature under a new key, which would hand the event downstream twice.
func TestBatch_AdyenRespelledSuccessNotANewEvent(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	item := adyenItem(t, "R3PL4YR3PL4YR3PL", "AUTHORISATION", 41250)
	code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(item))
	if code != 200 || outcomes(a) != "accepted" {
		t.Fatalf("first: %d %+v", code, a)
	}
	replay := bytes.Replace(item, []byte(`"success": "true"`), []byte(`"success": true`), 1)
	if bytes.Equal(replay, item) {
		t.Fatalf("the item has no success to respell: %s", item)
	}
	code, a = postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(replay))
	if code == 200 && outcomes(a) == "accepted" {
		t.Fatalf("respelled replay accepted as a new event: %+v", a)
	}
}

// TestBatch_AdyenLoneSurrogateInKeyFieldRefused: Adyen signs every lone surrogate (an
// escape such as \ud83d) as one character, U+FFFD, while the key keeps each spelling
// apart. A captured item whose pspReference (or another signed field of its key) held
// U+FFFD or a lone surrogate could be replayed with it spelled another way, its HMAC
// intact, as a new event handed downstream again: such an item is refused, naming the
// field, as one holding a colon is. merchantReference, the merchant's own text and in no
// key, may hold one.
func TestBatch_AdyenLoneSurrogateInKeyFieldRefused(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	a, err := signature.NewAdyenHMAC([]string{adyenKey})
	if err != nil {
		t.Fatal(err)
	}
	// item signs an item whose fields may hold U+FFFD (written \ufffd), and then spells
	// it as spelled: a lone surrogate escape signs as U+FFFD.
	item := func(psp, account, reference, spelled string) []byte {
		t.Helper()
		signed, err := a.SignItem([]byte(`{"amount":{"currency":"EUR","value":41250},"eventCode":"REFUND",` +
			`"merchantAccountCode":"` + account + `","merchantReference":"` + reference + `","originalReference":"",` +
			`"pspReference":"` + psp + `","success":"true"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(signed, []byte("\uFFFD")) {
			t.Fatalf("no U+FFFD in the signed item %s", signed)
		}
		return bytes.ReplaceAll(signed, []byte("\uFFFD"), []byte(spelled))
	}
	for _, c := range []struct {
		name, psp, account, spelled, field string
	}{
		{"PSPReferenceFFFD", `Z4HB8C2D6F1G9J3\ufffd`, "HotelBerlinMitte", "\uFFFD", "pspReference"},
		{"PSPReferenceEscaped", `Z4HB8C2D6F1G9J3\ufffd`, "HotelBerlinMitte", `\ufffd`, "pspReference"},
		{"PSPReferenceLoneSurrogate", `Z4HB8C2D6F1G9J3\ufffd`, "HotelBerlinMitte", `\ud83d`, "pspReference"},
		{"MerchantAccountCode", "Z4HB8C2D6F1G9J3K", `HotelBerlin\ufffdMitte`, `\udc00`, "merchantAccountCode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, ans := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(item(c.psp, c.account, "BK-1", c.spelled)))
			if code != http.StatusUnauthorized || !strings.Contains(ans.Error, c.field+" holds U+FFFD or a lone surrogate") {
				t.Errorf("%s holding U+FFFD or a lone surrogate: %d %+v; want 401 naming the field", c.field, code, ans)
			}
		})
	}
	code, ans := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(item("Z4HB8C2D6F1G9J3K", "HotelBerlinMitte", `BK-1 Jo \ufffd`, `\ud83d`)))
	if code != http.StatusOK || outcomes(ans) != "accepted" {
		t.Errorf("a lone surrogate in merchantReference: %d %+v, want accepted", code, ans)
	}
}

// TestBatch_AdyenItemWithLoneSurrogate: an Adyen item whose unsigned additionalData
// holds a lone surrogate (a shopper's name cut in the middle of an emoji), its signed
// fields and HMAC intact, is verified and accepted.
func TestBatch_AdyenItemWithLoneSurrogate(t *testing.T) {
	e := newEnv(t, sqlite.Options{}, adyenSource(t))
	item := adyenItem(t, "L0NE5URR0GATE001", "AUTHORISATION", 1000)
	// An unsigned member, as Adyen's additionalData carries (shopper name, etc.).
	item = bytes.Replace(item, []byte(`"additionalData": {`), []byte(`"additionalData": {"shopperName": "Jo \ud83d",`), 1)
	if !bytes.Contains(item, []byte(`\ud83d`)) {
		t.Fatalf("item not built as meant: %s", item)
	}
	code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(item))
	if code != http.StatusOK || outcomes(a) != "accepted" {
		t.Fatalf("signed Adyen item with a lone surrogate in additionalData: %d %+v, want accepted", code, a)
	}
}
