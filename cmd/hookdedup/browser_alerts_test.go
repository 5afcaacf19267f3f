//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestBrowserAlerts: a downstream that refuses every event opens an alert, told once to
// a slack channel; an operator finds it on the alerts page and acknowledges it, and the
// page says who did.
func TestBrowserAlerts(t *testing.T) {
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		t.Fatal("PLAYWRIGHT_DRIVER_PATH is unset: run `make deps e2e` (see BROWSER-TESTS.md)")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	opts := &playwright.RunOptions{DriverDirectory: driver, SkipInstallBrowsers: true, Verbose: false}
	if err := playwright.Install(opts); err != nil {
		t.Fatalf("playwright driver: %v", err)
	}
	pw, err := playwright.Run(opts)
	if err != nil {
		t.Fatalf("playwright: %v", err)
	}
	t.Cleanup(func() { pw.Stop() })
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"},
	})
	if err != nil {
		t.Fatalf("launch %s: %v", chromium, err)
	}
	t.Cleanup(func() { browser.Close() })

	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer downstream.Close()
	var mu sync.Mutex
	var chat []string
	chatSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		chat = append(chat, string(b))
		mu.Unlock()
	}))
	defer chatSrv.Close()

	cs := startAlertsConsole(t, fmt.Sprintf(`
[[source]]
name             = "pms"
signature        = "hmac-sha256"
signature_header = "X-Signature"
secret           = %q
event_id         = "/event_id"
forward_url      = %q
max_backoff      = "10ms"

[[alert]]
name     = "pms-down"
kind     = "downstream_failing"
source   = "pms"
times    = 3
channels = ["chat"]

[[alert_channel]]
name = "chat"
type = "slack"
url  = %q
`, e2ePMSSecret, downstream.URL, chatSrv.URL+"/hooks/T0/B0/browserCREDENTIAL"))
	pms := signature.Config{Scheme: "hmac-sha256", Secrets: []string{e2ePMSSecret}, Header: "X-Signature"}
	cs.send(t, "pms", pms, map[string]any{"event_id": "pms-evt-9", "booking_id": "BK-PMS-9", "status": "confirmed"}, "")

	db, err := sqlite.Open(cs.database, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.CreateUser(t, db, "olga", storage.RoleOperator, "olga's browser-test password")
	storagetest.Eventually(t, 60*time.Second, func() error {
		as, err := db.ActiveAlerts(context.Background())
		if err != nil || len(as) != 1 {
			return fmt.Errorf("active alerts %v (%v)", as, err)
		}
		return nil
	})

	bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
		BaseURL: playwright.String(cs.url), Viewport: &playwright.Size{Width: 1366, Height: 900},
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	page.SetDefaultTimeout(10000)
	var pageErrors []string
	page.OnPageError(func(err error) { pageErrors = append(pageErrors, err.Error()) })
	expect := playwright.NewPlaywrightAssertions(10000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	shots := screenshotDir(t)
	byTest := func(id string) playwright.Locator { return page.GetByTestId(id) }

	_, err = page.Goto("/login")
	must(err)
	must(page.GetByLabel("Username").Fill("olga"))
	must(page.GetByLabel("Password").Fill("olga's browser-test password"))
	must(byTest("login-submit").Click())
	must(expect.Locator(byTest("whoami")).ToContainText("olga"))
	must(page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Alerts", Exact: playwright.Bool(true)}).Click())
	row := byTest("alert-row")
	must(expect.Locator(row).ToHaveCount(1))
	must(expect.Locator(row).ToContainText("pms-down"))
	must(expect.Locator(row).ToContainText("downstream failed"))
	must(expect.Locator(row.GetByTestId("alert-state")).ToHaveText("open"))
	must(expect.Locator(byTest("alert-channels")).ToContainText("slack"))
	_, err = page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(shots, "alerts-01-open.png")), FullPage: playwright.Bool(true)})
	must(err)
	html, err := page.Content()
	must(err)
	if strings.Contains(html, "browserCREDENTIAL") {
		t.Error("the alerts page shows the slack URL's credential")
	}

	must(row.GetByTestId("alert-acknowledge").Click())
	must(expect.Locator(byTest("flash")).ToContainText("Acknowledged alert"))
	must(expect.Locator(row.GetByTestId("alert-state")).ToHaveText("acknowledged"))
	must(expect.Locator(row.GetByTestId("alert-who")).ToContainText("Acknowledged by olga"))
	must(expect.Locator(row.GetByTestId("alert-acknowledge")).ToHaveCount(0))
	_, err = page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(shots, "alerts-02-acknowledged.png")), FullPage: playwright.Bool(true)})
	must(err)

	audit, err := db.AuditLog(context.Background(), 0, 1)
	if err != nil || len(audit) != 1 || audit[0].Action != "acknowledge alert" || audit[0].Actor != "olga" {
		t.Errorf("audit = %+v (%v)", audit, err)
	}
	mu.Lock()
	if len(chat) != 1 || !strings.Contains(chat[0], "alert opened: pms-down on pms") {
		t.Errorf("chat got %q, want the opening once", chat)
	}
	mu.Unlock()
	if len(pageErrors) > 0 {
		t.Errorf("page errors: %v", pageErrors)
	}
}

// startAlertsConsole serves config (the whole file) on 127.0.0.1:0 in this process.
func startAlertsConsole(t *testing.T, config string) *consoleServer {
	t.Helper()
	dir := t.TempDir()
	cs := &consoleServer{config: filepath.Join(dir, "hookdedup.toml"), database: filepath.Join(dir, "hookdedup.db")}
	if err := os.WriteFile(cs.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--config", cs.config, "--addr", "127.0.0.1:0", "--database", cs.database},
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
	sc := bufio.NewScanner(pr)
	deadline := time.AfterFunc(20*time.Second, func() { pw.CloseWithError(fmt.Errorf("serve did not listen within 20s")) })
	defer deadline.Stop()
	for cs.url == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "hookdedup listening on "); ok {
			cs.url = u
		}
	}
	if cs.url == "" {
		t.Fatalf("serve did not listen: %v", sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cs
}
