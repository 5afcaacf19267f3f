//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The browser tests drive Debian's Chromium through Playwright's driver, both installed
// by `make deps` (see BROWSER-TESTS.md); `make e2e` runs them. They start the server
// in-process, feed it signed deliveries and use the console as a person would.

const (
	e2eOTASecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	e2ePMSSecret = "pms-shared-secret-for-the-browser-test"
	e2eBooking   = "BK-E2E-0042"
	// e2eAdminPassword is the admin's own, chosen in place of the printed one.
	e2eAdminPassword = "the admin's own browser-test password"
)

// screenshotDir is testoutput/screenshots at the repository's root.
func screenshotDir(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "testoutput", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consoleServer is `hookdedup serve` running in this process.
type consoleServer struct {
	url, password, config, database string
}

// startConsole writes a config with three sources — ota (standard-webhooks, keys derived
// from business fields when there is no event id, refunds summed), pms (forwarding to
// a closed port, one attempt, so its keys fail) and payments (the adyen preset) — and
// serves it on 127.0.0.1:0, with the flags extra.
func startConsole(t *testing.T, extra ...string) *consoleServer {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there once closed
	ln.Close()
	cs := &consoleServer{config: filepath.Join(dir, "hookdedup.toml"), database: filepath.Join(dir, "hookdedup.db")}
	cfg := fmt.Sprintf(`
[[source]]
name         = "ota"
signature    = "standard-webhooks"
secret       = %q
event_id     = "/event_id"
key_fields   = ["/property_id", "/booking_id", "/status", "/effective_date"]
amount_field = "/refund/amount"

[[source]]
name             = "pms"
signature        = "hmac-sha256"
signature_header = "X-Signature"
secret           = %q
event_id         = "/event_id"
forward_url      = "http://%s/events"
max_attempts     = 1
attempt_timeout  = "2s"

[[source]]
name     = "payments"
provider = "adyen"
secret   = %q
`, e2eOTASecret, e2ePMSSecret, closed, adyenKey)
	if err := os.WriteFile(cs.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		args := append([]string{"serve", "--config", cs.config, "--addr", "127.0.0.1:0", "--database", cs.database}, extra...)
		done <- run(ctx, args,
			func(string) string { return "" }, strings.NewReader(""), pw, &syncWriter{w: &logs})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", logs.String())
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(20 * time.Second)
	for cs.url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("serve stopped before listening: %v", <-done)
			}
			if p, ok := strings.CutPrefix(line, "created user admin with one-time password: "); ok {
				cs.password = p
			}
			if u, ok := strings.CutPrefix(line, "hookdedup listening on "); ok {
				cs.url = u
			}
		case <-timeout:
			t.Fatal("serve did not listen within 20s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	if cs.password == "" {
		t.Fatal("no one-time admin password printed")
	}
	return cs
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// send signs body as the source's provider would and posts it; it returns the answer.
func (cs *consoleServer) send(t *testing.T, source string, sc signature.Config, body map[string]any, msgID string) map[string]string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a raw <script> in the payload, as a hostile sender would write it
	if err := enc.Encode(body); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSpace(buf.Bytes())
	v, err := signature.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := signedRequest(v, cs.url, source, msgID, b)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /webhooks/%s: %s %v %v", source, resp.Status, a, err)
	}
	return a
}

func cancellation(refund string) map[string]any {
	return map[string]any{
		"type": "booking.cancelled", "property_id": "HTL-LIS-01", "booking_id": e2eBooking,
		"status": "cancelled", "effective_date": "2026-12-24", "channel": "booking.com",
		"guest":  map[string]any{"name": "Ana Costa <script>window.pwned=1</script>", "country": "PT"},
		"refund": map[string]any{"amount": json.Number(refund), "currency": "EUR"},
	}
}

// seed fills the server: realistic demo traffic, a cancellation of e2eBooking delivered
// twice with a different refund (a mismatch: no event id, so its key is derived from the
// business fields), and a pms event that the dispatcher fails to hand downstream.
func (cs *consoleServer) seed(t *testing.T) (stuckKey string) {
	t.Helper()
	var out bytes.Buffer
	err := runDemo(context.Background(), []string{"--url", cs.url, "--config", cs.config, "--database", cs.database, "--events", "40"},
		env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	ota := signature.Config{Scheme: "standard-webhooks", Secrets: []string{e2eOTASecret}}
	first := cs.send(t, "ota", ota, cancellation("180.00"), "msg_e2e_first")
	dup := cs.send(t, "ota", ota, cancellation("190.00"), "msg_e2e_again")
	if first["status"] != "accepted" || dup["status"] != "duplicate" || first["key"] != dup["key"] {
		t.Fatalf("cancellation answers: %v then %v", first, dup)
	}
	pms := signature.Config{Scheme: "hmac-sha256", Secrets: []string{e2ePMSSecret}, Header: "X-Signature"}
	a := cs.send(t, "pms", pms, map[string]any{"event_id": "pms-evt-7", "booking_id": "BK-PMS-7", "status": "confirmed"}, "")
	stuckKey = a["key"]

	// The dispatcher fails the one allowed attempt against the closed port.
	db, err := sqlite.Open(cs.database, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Eventually(t, 20*time.Second, func() error {
		c, err := db.Claim(context.Background(), "pms", stuckKey)
		if err != nil || c.State != storage.StateFailed {
			return fmt.Errorf("pms key not failed: %+v %v", c, err)
		}
		return nil
	})
	return stuckKey
}

func TestBrowser(t *testing.T) {
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		t.Fatal("PLAYWRIGHT_DRIVER_PATH is unset: run `make deps e2e` (see BROWSER-TESTS.md)")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	opts := &playwright.RunOptions{DriverDirectory: driver, SkipInstallBrowsers: true, Verbose: false}
	// Install only applies playwright-go's patch to the driver already there: offline.
	if err := playwright.Install(opts); err != nil {
		t.Fatalf("playwright driver: %v", err)
	}
	pw, err := playwright.Run(opts)
	if err != nil {
		t.Fatalf("playwright: %v", err)
	}
	t.Cleanup(func() { pw.Stop() })
	// A self-signed certificate for the HTTPS sign-in, made before the launch: Chromium
	// trusts it, and it alone, by its public key's hash. Every other certificate error
	// still stops the browser.
	tlsDir := t.TempDir()
	certPEM, keyPEM, cert := selfSigned(t, "localhost")
	certPath, keyPath := filepath.Join(tlsDir, "cert.pem"), filepath.Join(tlsDir, "key.pem")
	writeFile(t, certPath, certPEM)
	writeFile(t, keyPath, keyPEM)
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--disable-background-networking", "--disable-component-update",
			"--disable-sync", "--no-first-run",
			"--ignore-certificate-errors-spki-list=" + base64.StdEncoding.EncodeToString(spki[:])},
	})
	if err != nil {
		t.Fatalf("launch %s: %v", chromium, err)
	}
	t.Cleanup(func() { browser.Close() })

	cs := startConsole(t)
	stuckKey := cs.seed(t)
	shots := screenshotDir(t)

	bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
		BaseURL:  playwright.String(cs.url),
		Viewport: &playwright.Size{Width: 1366, Height: 900},
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	page.SetDefaultTimeout(10000)
	page.OnDialog(func(d playwright.Dialog) { d.Accept() }) // confirm() before releases
	var pageErrors []string
	page.OnPageError(func(err error) { pageErrors = append(pageErrors, err.Error()) })
	expect := playwright.NewPlaywrightAssertions(10000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) {
		t.Helper()
		_, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(shots, name+".png")), FullPage: playwright.Bool(true)})
		must(err)
	}
	goTo := func(path string) {
		t.Helper()
		_, err := page.Goto(path)
		must(err)
	}
	byTest := func(id string) playwright.Locator { return page.GetByTestId(id) }

	{ // SignIn
		t.Log("step: SignIn")
		goTo("/")
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/login`)))
		shot("01-login")
		must(page.GetByLabel("Username").Fill("admin"))
		must(page.GetByLabel("Password").Fill("wrong password"))
		must(byTest("login-submit").Click())
		must(expect.Locator(byTest("login-error")).ToContainText("Wrong username or password"))
		must(page.GetByLabel("Password").Fill(cs.password))
		must(byTest("login-submit").Click())
		// The printed password is one-time: the console asks for the admin's own first.
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/account/password`)))
		must(expect.Locator(byTest("password-required")).ToBeVisible())
		form := byTest("account-password")
		must(form.GetByLabel("Current password").Fill(cs.password))
		must(form.Locator(`input[name="password"]`).Fill(e2eAdminPassword))
		must(form.GetByLabel("New password again").Fill(e2eAdminPassword))
		shot("01b-choose-password")
		must(byTest("password-submit").Click())
		must(expect.Locator(byTest("flash")).ToContainText("no longer works"))
		must(expect.Locator(byTest("whoami")).ToContainText("admin"))
		// The duplicate cancellation's refund (190) and the demo's are summed.
		must(expect.Locator(byTest("card-money")).ToContainText(regexp.MustCompile(`[1-9][0-9,]*\.[0-9]{2}`)))
		must(expect.Locator(byTest("card-stuck")).ToContainText("1"))
		must(expect.Locator(byTest("chart").First()).ToBeVisible())
		shot("02-dashboard")
	}

	var dupURL string
	{ // FindDuplicateCancellation
		t.Log("step: FindDuplicateCancellation")
		goTo("/events")
		must(byTest("filter-booking").Fill(e2eBooking))
		_, err := page.GetByLabel("Outcome").SelectOption(playwright.SelectOptionValues{Values: &[]string{"duplicate"}})
		must(err)
		must(byTest("filter-submit").Click())
		rows := byTest("event-row")
		must(expect.Locator(rows).ToHaveCount(1))
		must(expect.Locator(rows).ToContainText("mismatch"))
		must(expect.Locator(rows).ToContainText("190"))
		shot("03-events-filtered")
		must(rows.GetByTestId("event-link").Click())
		must(expect.Locator(page.Locator("h1")).ToContainText("Delivery"))
		dupURL = page.URL()
	}

	{ // ReadDerivationAndDiff
		t.Log("step: ReadDerivationAndDiff")
		fields := byTest("key-fields")
		must(expect.Locator(fields).ToContainText("/booking_id"))
		must(expect.Locator(fields).ToContainText(`"` + e2eBooking + `"`))
		must(expect.Locator(byTest("canonical")).ToContainText(`"/booking_id":"` + e2eBooking + `"`))
		hash, err := byTest("hash").TextContent()
		must(err)
		must(expect.Locator(byTest("derived-key")).ToHaveText("derived:" + strings.TrimSpace(hash)))
		diff := byTest("diff")
		must(expect.Locator(diff.Locator(".diff-line.del")).ToContainText("180"))
		must(expect.Locator(diff.Locator(".diff-line.add")).ToContainText("190"))
		// Unchanged stretches fold into one line that says how long they are.
		fold := diff.Locator(".diff-line.fold").First()
		must(expect.Locator(fold).ToBeVisible())
		must(expect.Locator(fold).ToContainText("unchanged lines"))
		_, err = diff.Screenshot(playwright.LocatorScreenshotOptions{Path: playwright.String(filepath.Join(shots, "04b-diff.png"))})
		must(err)
		// The guest name carries a <script>: shown as text, never run.
		must(expect.Locator(byTest("body")).ToContainText("<script>window.pwned=1</script>"))
		pwned, err := page.Evaluate("() => window.pwned === undefined")
		must(err)
		if pwned != true {
			t.Error("the payload's script ran")
		}
		shot("04-event-mismatch")
	}

	{ // ReleaseStuckKey
		t.Log("step: ReleaseStuckKey")
		goTo("/keys")
		row := byTest("key-row").Filter(playwright.LocatorFilterOptions{HasText: "pms"})
		must(expect.Locator(row).ToHaveCount(1))
		must(expect.Locator(row).ToContainText("failed"))
		must(expect.Locator(row).ToContainText("no answer"))
		shot("05-keys-stuck")
		// The header checkbox selects every row (a little JavaScript; the form works without).
		all := page.GetByLabel("Select all keys")
		must(all.Check())
		must(expect.Locator(row.GetByTestId("key-check")).ToBeChecked())
		must(all.Uncheck())
		must(expect.Locator(row.GetByTestId("key-check")).Not().ToBeChecked())
		must(row.GetByTestId("key-check").Check())
		must(byTest("bulk-reason").Fill("downstream PMS was down; retried by hand (e2e)"))
		must(byTest("bulk-release").Click())
		must(expect.Locator(byTest("flash")).ToContainText("Released 1 key"))
		must(expect.Locator(byTest("empty")).ToContainText("No stuck keys"))
		goTo("/audit")
		entry := byTest("audit-row").First()
		must(expect.Locator(entry).ToContainText("release"))
		must(expect.Locator(entry).ToContainText("downstream PMS was down"))
		must(expect.Locator(entry).ToContainText("failed"))
		title, err := entry.Locator("td.key").GetAttribute("title")
		must(err)
		if title != stuckKey {
			t.Errorf("audit key = %q, want %q", title, stuckKey)
		}
		shot("06-audit")
	}

	{ // OpenAdyenBatchItem
		t.Log("step: OpenAdyenBatchItem")
		var out bytes.Buffer
		err := runDemo(context.Background(), []string{"--url", cs.url, "--config", cs.config, "--database", cs.database,
			"--provider", "adyen", "--events", "6"},
			env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard})
		if err != nil {
			t.Fatalf("demo --provider adyen: %v\n%s", err, out.String())
		}
		// The demo's first batch is redelivered with one new item: a request of two or
		// more items, some accepted, some duplicates. Open its second item.
		db, err := sqlite.Open(cs.database, sqlite.Options{})
		must(err)
		page1, err := db.Deliveries(context.Background(), storage.DeliveryFilter{Source: "payments", Limit: 200})
		must(err)
		var items []storage.Delivery
		for _, d := range page1.Deliveries {
			if d.Batch == 0 {
				continue
			}
			batch, err := db.BatchDeliveries(context.Background(), d.Batch)
			must(err)
			if len(batch) >= 2 {
				items = batch
				break
			}
		}
		db.Close()
		if items == nil {
			t.Fatalf("no Adyen request of two or more items was stored:\n%s", out.String())
		}
		n, b := len(items), strconv.FormatInt(items[0].Batch, 10)
		goTo("/events/" + strconv.FormatInt(items[1].ID, 10))
		heading := byTest("batch").Locator("h2")
		must(expect.Locator(heading).ToHaveText(fmt.Sprintf("Item 2 of %d of batch %s", n, b)))
		rows := byTest("batch-item")
		must(expect.Locator(rows).ToHaveCount(n))
		must(expect.Locator(rows.Nth(1)).ToContainText("this one"))
		must(expect.Locator(byTest("body")).ToContainText("hmacSignature"))
		shot("06b-adyen-batch-item")
		// The first item's link leads to that item, in the same batch.
		must(rows.Nth(0).Locator("td").First().GetByRole("link").Click())
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/events/` + strconv.FormatInt(items[0].ID, 10) + `$`)))
		must(expect.Locator(heading).ToHaveText(fmt.Sprintf("Item 1 of %d of batch %s", n, b)))
		must(expect.Locator(rows.Nth(0)).ToContainText("this one"))
		must(expect.Locator(rows.Nth(1).Locator("td").First().GetByRole("link")).ToHaveAttribute("href",
			regexp.MustCompile(`/events/`+strconv.FormatInt(items[1].ID, 10)+`$`)))
	}

	{ // OtherPages
		t.Log("step: OtherPages")
		goTo("/lab")
		must(byTest("lab-payload").Fill(`{"property_id":"HTL-LIS-01","booking_id":"` + e2eBooking + `","status":"cancelled","effective_date":"2026-12-24"}`))
		must(byTest("lab-submit").Click())
		must(expect.Locator(byTest("lab-claim")).ToContainText("duplicate"))
		must(expect.Locator(byTest("derived-key")).ToContainText("derived:"))
		shot("07-key-lab")
		goTo("/sources")
		must(expect.Locator(byTest("source")).ToHaveCount(3))
		body, err := page.Locator("body").TextContent()
		must(err)
		if strings.Contains(body, e2eOTASecret) || strings.Contains(body, e2ePMSSecret) {
			t.Error("a secret is on the sources page")
		}
		shot("08-sources")
		// Users: add one, give them another role, remove them.
		goTo("/users")
		must(expect.Locator(byTest("users")).ToContainText("admin"))
		add := byTest("add-user")
		must(add.GetByLabel("Name").Fill("rita"))
		_, err = add.GetByLabel("Role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"operator"}})
		must(err)
		must(add.GetByLabel("Password").Fill("rita's long password"))
		must(add.GetByRole("button").Click())
		must(expect.Locator(byTest("flash")).ToContainText("Added rita as operator."))
		rita := page.Locator(`tr[data-user="rita"]`)
		must(rita.GetByText("Change…").Click())
		_, err = rita.GetByTestId("user-role").GetByLabel("Role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"viewer"}})
		must(err)
		shot("09-users")
		must(rita.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Change role"}).Click())
		must(expect.Locator(byTest("flash")).ToContainText("rita is now viewer."))
		must(expect.Locator(rita.Locator(".badge")).ToHaveText("viewer"))
		must(rita.GetByText("Change…").Click())
		must(rita.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Remove rita"}).Click()) // confirm() accepted
		must(expect.Locator(byTest("flash")).ToContainText("Removed rita"))
		must(expect.Locator(rita).ToHaveCount(0))
		goTo("/audit")
		must(expect.Locator(byTest("audit-row").First()).ToContainText("remove user"))
		// Everyone reaches their own account from their name in the header.
		must(byTest("whoami").Click())
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/account$`)))
		must(expect.Locator(byTest("account-name")).ToHaveText("admin"))
		must(expect.Locator(byTest("account-password")).ToBeVisible())
		// An API token, made here and shown once, then revoked.
		must(byTest("new-token-form").GetByLabel("What it is for").Fill("support scripts"))
		must(byTest("new-token-form").GetByRole("button").Click())
		must(expect.Locator(byTest("new-token")).ToContainText("hdk_"))
		shot("09b-account")
		must(byTest("token-row").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Revoke"}).Click()) // confirm() accepted
		must(expect.Locator(byTest("flash")).ToContainText("Token revoked"))
		must(expect.Locator(byTest("new-token")).ToHaveCount(0))
		must(expect.Locator(byTest("token-row")).ToContainText("revoked"))
		goTo("/events")
		must(expect.Locator(byTest("event-row").First()).ToBeVisible())
		shot("10-events")
		must(page.SetViewportSize(390, 844))
		goTo("/")
		shot("11-dashboard-narrow")
		goTo(dupURL)
		// Nothing sticks out sideways on a phone: wide tables scroll inside their frame.
		width, err := page.Evaluate(`() => document.documentElement.scrollWidth`)
		must(err)
		if w, ok := width.(int); !ok || w > 390 {
			t.Errorf("the event page is %v px wide on a 390 px screen", width)
		}
		shot("12-event-narrow")
		must(page.SetViewportSize(1366, 900))
	}

	{ // SignOut
		t.Log("step: SignOut")
		goTo("/")
		must(byTest("logout").Click())
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/login`)))
		must(expect.Locator(byTest("flash")).ToContainText("signed out"))
		goTo("/events")
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/login\?next=`)))
		shot("13-signed-out")
	}

	{ // SignInOverHTTPS
		t.Log("step: SignInOverHTTPS")
		tcs := startConsole(t, "--tls-cert-file", certPath, "--tls-key-file", keyPath, "--http-addr", "127.0.0.1:0")
		if !strings.HasPrefix(tcs.url, "https://127.0.0.1:") {
			t.Fatalf("serve with a certificate listens on %s, want https://127.0.0.1:…", tcs.url)
		}
		sctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
			BaseURL:  playwright.String(tcs.url),
			Viewport: &playwright.Size{Width: 1366, Height: 900},
		})
		must(err)
		defer sctx.Close()
		spage, err := sctx.NewPage()
		must(err)
		spage.SetDefaultTimeout(10000)
		_, err = spage.Goto("/login")
		must(err)
		must(spage.GetByLabel("Username").Fill("admin"))
		must(spage.GetByLabel("Password").Fill(tcs.password))
		must(spage.GetByTestId("login-submit").Click())
		// Signed in: the console leaves the login page (for the console's home, or for
		// whatever it asks of a new admin first).
		must(expect.Page(spage).Not().ToHaveURL(regexp.MustCompile(`/login`)))
		if u := spage.URL(); !strings.HasPrefix(u, "https://") {
			t.Errorf("signed in at %s, want an https:// page", u)
		}
		cookies, err := sctx.Cookies()
		must(err)
		var session *playwright.Cookie
		for i := range cookies {
			if cookies[i].Name == "__Host-hookdedup_session" {
				session = &cookies[i]
			}
		}
		switch {
		case session == nil:
			t.Errorf("no session cookie after signing in over HTTPS: %+v", cookies)
		case !session.Secure || !session.HttpOnly:
			t.Errorf("session cookie over HTTPS: Secure %v, HttpOnly %v; want both", session.Secure, session.HttpOnly)
		}
		_, err = spage.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(shots, "14-https-signed-in.png")), FullPage: playwright.Bool(true)})
		must(err)
	}
	if len(pageErrors) > 0 {
		t.Errorf("script errors on the pages: %v", pageErrors)
	}
}
