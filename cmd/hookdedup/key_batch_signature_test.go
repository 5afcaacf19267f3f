package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// TestKey_BatchSignatureBeforeKeys: intake checks every item's signature before it keys
// any, so a request with an item that has no key and a later item whose signature
// fails is refused for the signature (401, naming that item). `hookdedup key` names
// the same item and reason as intake's answer, not the earlier item without a key, and
// says of no item that it would be accepted.
func TestKey_BatchSignatureBeforeKeys(t *testing.T) {
	const key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	a, err := signature.NewAdyenHMAC([]string{key})
	if err != nil {
		t.Fatal(err)
	}
	keyless, err := a.SignItem([]byte(`{"merchantReference":"BK-1","amount":{"currency":"EUR","value":100}}`))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := a.SignItem([]byte(`{"amount":{"currency":"EUR","value":100},"eventCode":"REFUND","merchantAccountCode":"HotelBerlinMitte",` +
		`"merchantReference":"BK-2","originalReference":"","pspReference":"PSP2","success":"true"}`))
	if err != nil {
		t.Fatal(err)
	}
	forged = []byte(strings.Replace(string(forged), `"value":100`, `"value":9100`, 1))
	body := `{"live":"false","notificationItems":[{"NotificationRequestItem":` + string(keyless) + `},` +
		`{"NotificationRequestItem":` + string(forged) + `}]}`

	srv, _, _ := consoleSite(t, sourceConfig{Name: "payments", Provider: "adyen", Secret: secrets{key}})
	resp, err := http.Post(srv.URL+"/webhooks/payments", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(answer), "item 1: signature") {
		t.Fatalf("intake: %d %s; the premise (401 for item 1's signature) does not hold", resp.StatusCode, answer)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "batch.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := keyWith(t, dir, "[[source]]\nname = \"payments\"\nprovider = \"adyen\"\nsecret = \""+key+"\"\n", "",
		"--source", "payments", file)
	if err == nil || !strings.Contains(err.Error(), "item 1: signature") {
		t.Errorf("hookdedup key: %v; want the refusal intake answers, item 1's signature\n%s", err, out)
	}
	if strings.Contains(out, "would be accepted") || !strings.Contains(out, "this request would not claim it") {
		t.Errorf("hookdedup key says an item of a request that intake refuses whole would be accepted:\n%s", out)
	}
}
