package receiver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// latin1Cancellation is a cancellation whose guest name is in ISO-8859-1: "Zoë" with ë
// as the one byte 0xEB, not UTF-8.
const latin1Cancellation = "{\"property_id\":\"HTL-LIS-01\",\"booking_id\":\"BK-1042\",\"status\":\"cancelled\",\"guest\":\"Zo\xeb\"}"

// A body in another character set, declared in its Content-Type, is refused naming the
// declared charset: "invalid UTF-8 at byte 93" alone would leave the sender to guess
// why text its own encoder wrote is called broken.
func TestHandler_DeclaredCharsetNamed(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	for _, ct := range []string{"application/json; charset=ISO-8859-1", `application/json; charset="windows-1252"`} {
		code, a, _ := e.post(t, "ota", "evt_latin1", latin1Cancellation, func(r *http.Request) { r.Header.Set("Content-Type", ct) })
		want := "the body is declared charset=" + strings.Trim(strings.ToLower(strings.TrimPrefix(ct, "application/json; charset=")), `"`) +
			"; hookdedup takes UTF-8 JSON"
		if code != http.StatusBadRequest || !strings.Contains(a.Error, "invalid UTF-8 at byte") || !strings.Contains(a.Error, want) {
			t.Errorf("Content-Type %q: %d %q, want 400 naming the invalid UTF-8 and %q", ct, code, a.Error, want)
		}
	}
	// Declared UTF-8, or nothing declared: the parser's words alone.
	for _, ct := range []string{"application/json; charset=utf-8", "application/json"} {
		code, a, _ := e.post(t, "ota", "evt_latin1", latin1Cancellation, func(r *http.Request) { r.Header.Set("Content-Type", ct) })
		if code != http.StatusBadRequest || strings.Contains(a.Error, "declared") {
			t.Errorf("Content-Type %q: %d %q, want 400 without a word of a declared charset", ct, code, a.Error)
		}
	}
	// A body in that charset that is also valid UTF-8 (ASCII alone) is taken.
	code, a, _ := e.post(t, "ota", "evt_ascii", cancellation, func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=iso-8859-1") })
	if code != http.StatusOK {
		t.Errorf("an ASCII body declared iso-8859-1: %d %q, want 200", code, a.Error)
	}
}

// A batched source says the same of a batch in another charset.
func TestBatch_DeclaredCharsetNamed(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"mews-url-token-1"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}}
	e := newEnv(t, sqlite.Options{}, src)
	body := "{\"Events\":[{\"Discriminator\":\"CustomerAdded\",\"Value\":{\"Name\":\"Zo\xeb\"}}]}"
	req, _ := http.NewRequest("POST", e.srv.URL+"/webhooks/mews?token=mews-url-token-1", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json; charset=iso-8859-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct{ Error string }
	json.Unmarshal(raw, &a)
	if want := "(the body is declared charset=iso-8859-1; hookdedup takes UTF-8 JSON)"; resp.StatusCode != http.StatusBadRequest || !strings.HasSuffix(a.Error, want) {
		t.Errorf("a batch in ISO-8859-1: %d %q, want 400 ending %q", resp.StatusCode, a.Error, want)
	}
}
