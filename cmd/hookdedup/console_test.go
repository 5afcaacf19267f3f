package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// consoleSite is the receiver and the console on one mux, as serve wires them, on the
// zero-config source whose secret is generated into the database.
func consoleSite(t *testing.T, fileSources ...sourceConfig) (*httptest.Server, *sqlite.DB, []receiver.Source) {
	t.Helper()
	cfg := defaultConfig()
	cfg.Sources = append([]sourceConfig{defaultSource()}, fileSources...)
	return consoleSiteWith(t, cfg)
}

// consoleSiteWith is consoleSite on cfg's settings and sources.
func consoleSiteWith(t *testing.T, cfg config) (*httptest.Server, *sqlite.DB, []receiver.Source) {
	t.Helper()
	ctx := context.Background()
	db := storagetest.Open(t)
	getenv := func(name string) string {
		if name == "PMS_TOKEN" {
			return "env-token-never-shown"
		}
		return ""
	}
	sources, err := cfg.sources(getenv, func(name string) (string, error) {
		return db.SettingOrInit(ctx, generatedSecretSetting(name), newSecret)
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	receiver.New(receiver.Config{Sources: sources, Store: db, MaxBody: cfg.MaxBody}).Register(mux)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // stops the background roll-up before the database closes
	console, err := newConsole(ctx, db, sources, cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	console.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	storagetest.CreateUser(t, db, "root", storage.RoleAdmin, "admin password")
	return srv, db, sources
}

type consoleBrowser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *consoleBrowser) do(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		if b.csrf != "" {
			form.Set("csrf", b.csrf)
		}
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if m := csrfInput.FindSubmatch(out); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(out)
}

func signIn(t *testing.T, base string) *consoleBrowser {
	jar, _ := cookiejar.New(nil)
	b := &consoleBrowser{t: t, base: base, c: &http.Client{Jar: jar}}
	if code, body := b.do(http.MethodPost, "/login", url.Values{"username": {"root"}, "password": {"admin password"}}); code != 200 || !strings.Contains(body, "Dashboard") {
		t.Fatalf("sign in: %d", code)
	}
	return b
}

// TestConsole_Mounted checks the adapters in newConsole: deliveries taken by the real
// receiver show in the console, the key lab derives with the receiver's Derive, the
// sources page describes each scheme, and no secret reaches a page except through the
// admin's reveal of the generated one.
func TestConsole_Mounted(t *testing.T) {
	pms := sourceConfig{Name: "pms", Signature: "token", TokenHeader: "X-Token", SecretEnv: "PMS_TOKEN",
		Secret: secrets{"file-token-never-shown"}, KeyFields: []string{"/booking_id"}}
	srv, db, sources := consoleSite(t, pms)
	ctx := context.Background()
	generated, err := db.Setting(ctx, generatedSecretSetting("ota"))
	if err != nil {
		t.Fatal(err)
	}
	ota := sources[0]
	body := []byte(`{"property_id":"HTL-1","booking_id":"BK-7","status":"cancelled","effective_date":"2026-12-01","refund":{"amount":99.5}}`)
	for range 2 {
		h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_1"}}
		if err := ota.Verifier.Sign(h, url.Values{}, body, time.Now()); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/ota", bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("webhook: %v %v", resp, err)
		}
		resp.Body.Close()
	}

	b := signIn(t, srv.URL)
	pages := map[string][]string{
		"/":                    {"ota", "pms"},
		"/events?booking=BK-7": {"duplicate", "BK-7", "msg_1"},
		"/events/1":            {"The provider's event id", "header:webhook-id", "msg_1", "Every delivery of this key"},
		"/keys?state=all":      {"msg_1"},
		"/sources":             {"standard-webhooks", "signed timestamp", "not covered", "from environment variable PMS_TOKEN", "generated on first start", "Reveal"},
		"/audit":               {"add user", "root as admin"},
		"/users":               {"root"},
		"/lab":                 {"lab-form"},
	}
	for path, wants := range pages {
		code, page := b.do(http.MethodGet, path, nil)
		if code != 200 {
			t.Errorf("GET %s = %d", path, code)
		}
		for _, w := range wants {
			if !strings.Contains(page, w) {
				t.Errorf("GET %s lacks %q", path, w)
			}
		}
		for _, secret := range []string{generated, "env-token-never-shown", "file-token-never-shown"} {
			if strings.Contains(page, secret) {
				t.Errorf("GET %s shows a secret", path)
			}
		}
	}

	// The key lab runs the receiver's derivation: no event id header, so the key is
	// derived from the business fields, and no delivery holds it.
	code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"ota"}, "payload": {string(body)}})
	if code != 200 || !strings.Contains(page, "derived:") || !strings.Contains(page, "/booking_id") || !strings.Contains(page, "would be accepted") {
		t.Errorf("lab: %d", code)
	}
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"ota"}, "payload": {string(body)}, "headers": {"webhook-id: msg_1"}})
	if code != 200 || !strings.Contains(page, "would be a duplicate") || !strings.Contains(page, "its payload is the first delivery") {
		t.Errorf("lab with the event id header: %d", code)
	}
	// The same key with another refund: the receiver's probe carries the money, and the
	// lab compares it with the first delivery's.
	changed := bytes.Replace(body, []byte("99.5"), []byte("12"), 1)
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"ota"}, "payload": {string(changed)}, "headers": {"webhook-id: msg_1"}})
	if code != 200 || !strings.Contains(page, "would be a duplicate") || !strings.Contains(page, "money mismatch") ||
		!strings.Contains(page, "12, status cancelled") {
		t.Errorf("lab with another refund: %d", code)
	}
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"ota"}, "payload": {"not json"}})
	if code != 200 || !strings.Contains(page, "not valid JSON") {
		t.Errorf("lab with a bad payload: %d", code)
	}

	code, page = b.do(http.MethodPost, "/sources/ota/reveal", url.Values{})
	if code != 200 || !strings.Contains(page, generated) {
		t.Fatalf("reveal: %d", code)
	}
	if code, _ := b.do(http.MethodPost, "/sources/pms/reveal", url.Values{}); code != http.StatusBadRequest {
		t.Errorf("reveal of a configured secret = %d, want 400", code)
	}
}

// TestConsole_SessionSettings checks that session_idle and session_max reach the
// console: the cookie lives session_max, and a session idle longer than session_idle
// (but well within the default) has to sign in again.
func TestConsole_SessionSettings(t *testing.T) {
	cfg := defaultConfig()
	cfg.Sources = []sourceConfig{defaultSource()}
	cfg.SessionIdle, cfg.SessionMax = 30*time.Minute, 90*time.Minute
	srv, db, _ := consoleSiteWith(t, cfg)
	b := signIn(t, srv.URL)
	if code, _ := b.do(http.MethodGet, "/events", nil); code != http.StatusOK {
		t.Fatalf("right after sign-in: %d", code)
	}
	// The jar keeps no Max-Age; sign in afresh and read it off the answer.
	form := url.Values{"username": {"root"}, "password": {"admin password"}}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("Set-Cookie"); !strings.Contains(h, "Max-Age=5400") {
		t.Errorf("session cookie %q, want Max-Age=5400 (session_max 90m)", h)
	}
	// Idle for longer than session_idle, shorter than the default idle limit (2h) and
	// than session_max.
	storagetest.AgeSessions(t, db, 31*time.Minute)
	code, page := b.do(http.MethodGet, "/events", nil)
	if code != http.StatusOK || !strings.Contains(page, "signed out after a while without activity") {
		t.Fatalf("after session_idle: %d, want the sign-in page saying why", code)
	}
}

func TestConsoleSources_Masked(t *testing.T) {
	cfg := defaultConfig()
	cfg.Sources = []sourceConfig{
		defaultSource(),
		{Name: "gh", Signature: "github", Secret: secrets{"new-secret-value", "old-secret-value"}},
	}
	sources, err := cfg.sources(func(string) string { return "" }, func(string) (string, error) { return "whsec_Z2VuZXJhdGVkLXNlY3JldC12YWx1ZQ==", nil })
	if err != nil {
		t.Fatal(err)
	}
	got := consoleSources(sources, cfg)
	if len(got) != 2 || len(got[0].Secrets) != 1 || !got[0].Secrets[0].Revealable || len(got[1].Secrets) != 2 || got[1].Secrets[0].Revealable {
		t.Fatalf("sources = %+v", got)
	}
	if !got[0].Timestamped || !got[0].Integrity || got[1].Timestamped || !got[1].Integrity {
		t.Errorf("scheme properties wrong: %+v", got)
	}
	for _, s := range got {
		for _, sec := range s.Secrets {
			if strings.Contains(sec.Masked+sec.Origin, "secret-value") || strings.Contains(sec.Masked+sec.Origin, "Z2VuZXJhdGVk") {
				t.Errorf("%s: a secret leaks into %+v", s.Name, sec)
			}
		}
	}
}

// TestConsole_LabKeysAsIntakeDoes: the key lab takes a pasted body the way intake does. A
// batched source's body (Mews) gives one result per item, each keyed on its own and
// looked up as claimed or free, so that a delivery intake has just accepted is shown a
// duplicate now; a form-encoded one (GitHub) is keyed on its payload field; a body intake
// would refuse before keying any event is answered with intake's reason.
func TestConsole_LabKeysAsIntakeDoes(t *testing.T) {
	mews := sourceConfig{Name: "mews", Provider: "mews", Secret: secrets{"mews-token-0123456789abcdef"}}
	github := sourceConfig{Name: "github", Provider: "github", Secret: secrets{"github-secret-0123456789"}}
	srv, _, _ := consoleSite(t, mews, github)
	const body = `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac870003e6b6",` +
		`"Events":[{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"bfc7d1b8-8f5c-4a91-9a0f-ac870003e7a1"}}]}`
	resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-token-0123456789abcdef", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("intake: %d, want 200", resp.StatusCode)
	}

	b := signIn(t, srv.URL)
	code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
	page = html.UnescapeString(page)
	if code != http.StatusOK || strings.Contains(page, "no idempotency key") || !strings.Contains(page, "would be a duplicate") {
		i := strings.Index(page, "no idempotency key")
		excerpt := ""
		if i >= 0 {
			excerpt = page[i:min(len(page), i+160)]
		}
		t.Errorf("lab on the body of a Mews delivery intake accepted: %d %q; want its event's key, a duplicate now", code, excerpt)
	}

	// Two events in one batch: one result each, the first a duplicate now, the second
	// free; a body that holds no batch is answered as intake would refuse it.
	two := strings.Replace(body, `}}]}`, `}},{"Discriminator":"ReservationUpdated","Value":{"Id":"0b0e5c1a-1d2e-4f3a-9b8c-7d6e5f4a3b2c"}}]}`, 1)
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {two}})
	page = html.UnescapeString(page)
	if code != http.StatusOK || strings.Count(page, `data-testid="lab-item"`) != 2 || !strings.Contains(page, "2 items at") ||
		!strings.Contains(page, "would be a duplicate") || !strings.Contains(page, "would be accepted") {
		t.Errorf("lab on a batch of two events, the first delivered: %d, want one result per item", code)
	}
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {`{"Events":{}}`}})
	if code != http.StatusOK || !strings.Contains(page, `data-testid="lab-error"`) || !strings.Contains(page, "batch: ") {
		t.Errorf("lab on a body whose batch is no array: %d, want the batch's error", code)
	}

	// A form-encoded delivery is keyed on its payload field, as intake keys it.
	form := url.Values{"payload": {`{"action":"opened","number":7}`}}.Encode()
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"github"}, "payload": {form},
		"headers": {"Content-Type: application/x-www-form-urlencoded\nX-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958"}})
	page = html.UnescapeString(page)
	if code != http.StatusOK || strings.Contains(page, "not valid JSON") || !strings.Contains(page, "72d3162e-cc78-11e3-81ab-4c9367dc0958") ||
		!strings.Contains(page, "would be accepted") {
		t.Errorf("lab on a form-encoded GitHub delivery: %d, want it keyed on its delivery id", code)
	}
	code, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"github"}, "payload": {"action=opened"},
		"headers": {"Content-Type: application/x-www-form-urlencoded"}})
	if code != http.StatusOK || !strings.Contains(page, "no payload field") {
		t.Errorf("lab on a form without its payload field: %d, want intake's refusal", code)
	}
}

// TestConsole_LabBatchItemRepeatingAKeyIsADuplicate: two items of one key in one
// request (a sender that puts one event in a batch twice) are keyed by the lab as intake
// keys them: intake claims the key with the first and answers the second a duplicate,
// whatever the database holds, and the lab says so of the second.
func TestConsole_LabBatchItemRepeatingAKeyIsADuplicate(t *testing.T) {
	mews := sourceConfig{Name: "mews", Provider: "mews", Secret: secrets{"mews-token-0123456789abcdef"}}
	srv, _, _ := consoleSite(t, mews)
	const event = `{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"bfc7d1b8-8f5c-4a91-9a0f-ac870003e7a1"}}`
	body := `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac870003e6b6",` +
		`"Events":[` + event + `,` + event + `]}`

	b := signIn(t, srv.URL)
	code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
	page = html.UnescapeString(page)
	if code != http.StatusOK || strings.Count(page, `data-testid="lab-item"`) != 2 {
		t.Fatalf("lab on a batch of two items: %d, want one result per item", code)
	}
	accepted := strings.Count(page, "would be accepted")
	dup := strings.Count(page, "would be a duplicate")

	// What intake does with that very request.
	resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-token-0123456789abcdef", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Items []struct {
			Status string `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || len(ans.Items) != 2 {
		t.Fatalf("intake: %d %v %+v", resp.StatusCode, err, ans)
	}
	if ans.Items[1].Status != "duplicate" {
		t.Fatalf("intake answered the second item %q; the premise (a duplicate) does not hold", ans.Items[1].Status)
	}
	if !strings.Contains(page, "Item 0 of this request has the same key") || dup != 1 || accepted != 1 {
		t.Errorf("the lab says of a batch whose two items share a key: %d \"would be accepted\", %d \"would be a duplicate\"; "+
			"intake answers its second item %q: the lab should say the second would be a duplicate (of the first item)",
			accepted, dup, ans.Items[1].Status)
	}

	// Once the key is held, the request's first item claims nothing: both items are
	// duplicates of the delivery that holds it, and the lab says so of each.
	_, page = b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
	page = html.UnescapeString(page)
	if n := strings.Count(page, "a delivery of this payload now would be a duplicate"); n != 2 ||
		strings.Contains(page, "claims it first") {
		t.Errorf("the lab on a batch whose two items share a held key says %d of them are the holder's duplicates, "+
			"or says the first item claims it; want both the holder's duplicates", n)
	}
}
