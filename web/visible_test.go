package web_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// Values that would render reversed or broken across lines if shown as sent: an event
// id that reads "evt_exe.png…" but holds a right-to-left override and a line separator,
// and a user, a source, a header and a reason that carry bidi controls too.
const (
	spoofKey     = "evt_\u202Egnp.exe\u2028x"
	spoofKeyShow = `evt_\u202egnp.exe\u2028x`
	spoofUser    = "root\u202E"
	spoofSource  = "ot\u2066a\u2069"
	spoofReason  = "fixed \u202Edeksa\u200F"
)

// spoofEnv is the console on a real database holding one delivery of spoofKey whose
// headers and body carry bidi controls too, a rejected delivery to an unknown source
// named spoofSource, and an admin named spoofUser.
func spoofEnv(t *testing.T) (*consoleEnv, *storage.Delivery) {
	t.Helper()
	ctx := context.Background()
	db := storagetest.Open(t)
	clock := storagetest.NewClock(time.Now().UTC())
	db.Now = clock.Now
	storagetest.CreateUser(t, db, spoofUser, storage.RoleAdmin, consolePassword)
	s, err := web.New(ctx, web.Config{
		Store: db, Static: static.FS, Now: clock.Now, BcryptCost: bcrypt.MinCost,
		Sources: []web.Source{{Name: "ota", Scheme: "standard-webhooks", Timestamped: true, Integrity: true,
			EventID: "/event_id", TTL: 24 * time.Hour}},
		Derive: func(source string, h http.Header, body []byte) (storage.Derivation, error) {
			return storage.Derivation{Key: spoofKey, Method: "event_id", EventIDFrom: "/event_id"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	d := &storage.Delivery{Source: "ota", Key: spoofKey, KeyMethod: "event_id", KeyFrom: "/event_id", PayloadHash: "h",
		Booking: "BK-\u202E24", Property: "HTL\u200B1", EventStatus: "cancel\u2029led", ContentType: "application/json\u202E",
		Headers: http.Header{"Webhook-Id": {spoofKey}, "X-Note\u202E": {"a\u2067b"}},
		Body:    []byte(`{"event_id":"` + spoofKey + `","guest":"` + "\u2066Bob\u2069" + `"}`)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	rej := &storage.Delivery{Source: spoofSource, Outcome: storage.Rejected, Status: 404, Error: "unknown source"}
	if err := db.Record(ctx, rej, storage.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	return &consoleEnv{db: db, srv: srv, clock: clock}, d
}

// hiddenChar reports whether r renders invisibly or reorders text: what the console must
// show as an escape. Tabs and line breaks are the markup's own layout.
func hiddenChar(r rune) bool {
	if r == '\n' || r == '\t' || r == '\r' {
		return false
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// shownText parses page and returns the text a reader sees (with the attributes a
// browser shows: title, aria-label, placeholder, alt, data-confirm), and how many
// escape markers it holds. Form fields that post a value back (input values, textareas)
// keep it as typed, so that it round-trips, and are left out.
func shownText(t *testing.T, page string) (string, int) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	markers := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			b.WriteString(n.Data)
		case html.ElementNode:
			switch n.Data {
			case "script", "style", "textarea":
				return
			}
			for _, a := range n.Attr {
				switch a.Key {
				case "title", "aria-label", "placeholder", "alt", "data-confirm":
					b.WriteString(" " + a.Val + " ")
				case "class":
					if strings.Contains(" "+a.Val+" ", " esc ") {
						markers++
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return b.String(), markers
}

func TestConsole_SpoofableTextShownAsEscapes(t *testing.T) {
	e, d := spoofEnv(t)
	c := e.client(t).login(spoofUser)

	// The release form posts the key as stored, so that releasing it works; a release
	// with a reason writes the key, the reason and the user to the audit log.
	if _, keys := c.page("/keys?state=all"); !slices.Contains(keys.testid("key-check").attrs("value"), "ota/"+spoofKey) {
		t.Error("the release checkbox does not carry the key as stored")
	}
	code, _, h := c.post("/keys/release", url.Values{"k": {"ota/" + spoofKey}, "reason": {spoofReason}, "action": {"release"}, "return": {"/keys"}})
	if code != http.StatusSeeOther {
		t.Fatalf("release: %d %v", code, h)
	}
	if cl, err := e.db.Claim(context.Background(), "ota", spoofKey); err != nil || cl.State != storage.StateReleased {
		t.Fatalf("after release: %+v, %v", cl, err)
	}
	c.get("/lab")
	_, lab, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"event_id":"` + spoofKey + `"}`}})

	pages := []struct {
		path  string
		body  string // a POST's answer; "" to GET path
		wants []string
	}{
		{path: "/events", wants: []string{spoofKeyShow, `ot\u2066a\u2069`, `BK-\u202e24`, `HTL\u200b1`, `cancel\u2029led`, `root\u202e`}},
		{path: fmt.Sprintf("/events/%d", d.ID), wants: []string{spoofKeyShow, `X-Note\u202e`, `a\u2067b`,
			`"event_id": "` + spoofKeyShow + `"`, `"guest": "\u2066Bob\u2069"`, `application/json\u202e`}},
		{path: "/keys?state=all", wants: []string{spoofKeyShow}},
		{path: "/audit", wants: []string{spoofKeyShow, `fixed \u202edeksa\u200f`, `root\u202e`}},
		{path: "/users", wants: []string{`root\u202e`}},
		{path: "/account", wants: []string{`root\u202e`}},
		{path: "/lab (POST)", body: lab, wants: []string{spoofKeyShow}},
	}
	for _, p := range pages {
		t.Run(p.path, func(t *testing.T) {
			body := p.body
			if body == "" {
				var code int
				code, body = c.get(p.path)
				if code != http.StatusOK {
					t.Fatalf("GET %s = %d", p.path, code)
				}
			}
			text, markers := shownText(t, body)
			for i, r := range text {
				if hiddenChar(r) {
					t.Errorf("raw %U shown at %d: …%q…", r, i, text[max(0, i-30):min(len(text), i+30)])
				}
			}
			for _, w := range p.wants {
				if !strings.Contains(text, w) {
					t.Errorf("page does not show %q", w)
				}
			}
			if markers == 0 {
				t.Error("no escape is marked (class esc)")
			}
		})
	}
}

func TestConsole_CSVShowsEscapes(t *testing.T) {
	e, _ := spoofEnv(t)
	c := e.client(t).login(spoofUser)
	code, body, _ := c.do(http.MethodGet, "/events.csv", nil)
	if code != http.StatusOK {
		t.Fatalf("csv: %d", code)
	}
	for i, r := range body {
		if hiddenChar(r) {
			t.Errorf("raw %U in the CSV at %d: …%q…", r, i, body[max(0, i-30):min(len(body), i+30)])
		}
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("csv rows = %q, %v", rows, err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	got := map[string]bool{}
	for _, r := range rows[1:] {
		got[r[col["key"]]], got[r[col["source"]]], got[r[col["booking"]]] = true, true, true
	}
	for _, w := range []string{spoofKeyShow, `ot\u2066a\u2069`, `BK-\u202e24`} {
		if !got[w] {
			t.Errorf("no cell %q in %q", w, rows)
		}
	}
}

// The key lab reads pasted headers as intake receives them: trimmed of spaces and tabs
// only, so that an id ending in U+00A0 is derived as intake derives it.
func TestConsole_LabKeepsUnicodeSpaces(t *testing.T) {
	var got string
	e := newConsoleEnv(t, func(cfg *web.Config) {
		cfg.Derive = func(source string, h http.Header, body []byte) (storage.Derivation, error) {
			got = h.Get("Webhook-Id")
			return storage.Derivation{Key: got, Method: "event_id", EventIDFrom: "header:webhook-id"}, nil
		}
	})
	c := e.as(t, "viewer")
	c.get("/lab")
	code, _, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{}`},
		"headers": {"Webhook-Id:  evt_1\u00a0\t\r\nX-Other: 1"}})
	if code != http.StatusOK {
		t.Fatalf("POST /lab = %d", code)
	}
	if got != "evt_1\u00a0" {
		t.Errorf("the lab derived from Webhook-Id %q, want %q", got, "evt_1\u00a0")
	}
}

// TestConsole_CurrencyShownAsEscapes: a currency comes from the payload as sent, so one
// of "\u202eRUE" renders as "EUR" unless escaped; the bulk preview's money, the
// dashboard's and the ledger's totals and rows show it as `\u202eRUE`, apart from EUR.
func TestConsole_CurrencyShownAsEscapes(t *testing.T) {
	e := newConsoleEnv(t)
	const fake = "\u202eRUE"
	for i, m := range [][2]string{{"400.00", "EUR"}, {"9000.00", fake}} {
		d := &storage.Delivery{Source: "ota", Key: "bidi-" + string(rune('a'+i)), KeyMethod: "event_id", PayloadHash: m[0],
			EventStatus: "refunded", Amount: m[0], Currency: m[1], ContentType: "application/json", Body: []byte(`{"refund":1}`)}
		storagetest.Record(t, e.db, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
		dup := *d // sent again: a duplicate caught, its money on the dashboard and the ledger
		dup.ID, dup.Outcome = 0, ""
		storagetest.Record(t, e.db, &dup, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	}
	e.clock.Add(time.Hour) // stuck
	op := e.as(t, storage.RoleOperator)

	code, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "state": {"stuck"},
		"status": {"refunded"}, "reason": {"refund run failed at the PMS"}})
	if code != http.StatusSeeOther {
		t.Fatalf("preview: %d", code)
	}
	_, bulk := op.page(h.Get("Location"))
	_, dashboard := op.page("/")
	_, ledger := op.page("/ledger")
	for _, shown := range []struct {
		where string
		n     nodes
	}{
		{"bulk preview's money", bulk.testid("bulk-money-row")},
		{"dashboard's money", dashboard.testid("money")},
		{"ledger's totals", ledger.testid("ledger-total")},
		{"ledger's rows", ledger.testid("ledger-row")},
	} {
		txt := shown.n.text()
		if strings.ContainsRune(txt, '\u202e') || !strings.Contains(txt, `\u202e`) || !strings.Contains(txt, "EUR") {
			t.Errorf("%s: %q; want EUR, and %q shown with the escape \\u202e", shown.where, txt, fake)
		}
	}
}
