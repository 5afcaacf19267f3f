//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBrowserBulk: one operator reprocesses every stuck refund from a preview; its
// money is above the EUR approval threshold, so it waits; the requester is offered no
// approval, and a second operator, signed in in another browser context, approves it
// from the pending approvals page; the action then runs to the end.
func TestBrowserBulk(t *testing.T) {
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		t.Fatal("PLAYWRIGHT_DRIVER_PATH is unset: run `make deps e2e` (see BROWSER-TESTS.md)")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	opts := &playwright.RunOptions{DriverDirectory: driver, SkipInstallBrowsers: true}
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
		Args: []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run"},
	})
	if err != nil {
		t.Fatalf("launch %s: %v", chromium, err)
	}
	t.Cleanup(func() { browser.Close() })

	// startConsole's own config, overridden by a later --config: refunds of ota in
	// their currency, handed to a closed port once, so that their keys fail; and a
	// threshold of EUR 1,000.00.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	config := filepath.Join(t.TempDir(), "bulk.toml")
	writeFile(t, config, []byte(fmt.Sprintf(`
[approval_threshold]
EUR = "1000.00"

[[source]]
name           = "ota"
signature      = "standard-webhooks"
secret         = %q
event_id       = "/event_id"
amount_field   = "/refund/amount"
currency_field = "/refund/currency"
forward_url    = "http://%s/events"
max_attempts   = 1
attempt_timeout = "2s"
`, e2eOTASecret, closed)))
	cs := startConsole(t, "--config", config)

	ota := signature.Config{Scheme: "standard-webhooks", Secrets: []string{e2eOTASecret}}
	for i, r := range [][2]string{{"600.00", "EUR"}, {"700.50", "EUR"}, {"5000", "JPY"}} {
		cs.send(t, "ota", ota, map[string]any{"event_id": fmt.Sprintf("refund-%d", i), "status": "refunded",
			"refund": map[string]any{"amount": json.Number(r[0]), "currency": r[1]}}, fmt.Sprintf("msg_refund_%d", i))
	}
	db, err := sqlite.Open(cs.database, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Eventually(t, 30*time.Second, func() error {
		n, err := db.StuckCounts(context.Background(), time.Now())
		if err != nil || n["ota"] != 3 {
			return fmt.Errorf("stuck keys %v, %v; want 3 failed", n, err)
		}
		return nil
	})
	const password = "a bulk browser-test password"
	storagetest.CreateUser(t, db, "ana", storage.RoleOperator, password)
	storagetest.CreateUser(t, db, "ben", storage.RoleOperator, password)

	shots := screenshotDir(t)
	expect := playwright.NewPlaywrightAssertions(15000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// signIn opens a browser context of its own (its own cookies) signed in as name.
	signIn := func(name string) playwright.Page {
		t.Helper()
		bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{BaseURL: playwright.String(cs.url),
			Viewport: &playwright.Size{Width: 1366, Height: 900}})
		must(err)
		t.Cleanup(func() { bctx.Close() })
		page, err := bctx.NewPage()
		must(err)
		page.SetDefaultTimeout(15000)
		page.OnDialog(func(d playwright.Dialog) { d.Accept() })
		_, err = page.Goto("/login")
		must(err)
		must(page.GetByLabel("Username").Fill(name))
		must(page.GetByLabel("Password").Fill(password))
		must(page.GetByTestId("login-submit").Click())
		must(expect.Locator(page.GetByTestId("whoami")).ToContainText(name))
		return page
	}
	shot := func(page playwright.Page, name string) {
		t.Helper()
		_, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(shots, name+".png")), FullPage: playwright.Bool(true)})
		must(err)
	}

	ana := signIn("ana")
	var actionURL string
	{ // Request: from the stuck keys, a preview of a reprocess of all of them, then start.
		t.Log("step: Request")
		_, err := ana.Goto("/keys?state=stuck")
		must(err)
		must(ana.GetByTestId("bulk-all").Click())
		must(expect.Page(ana).ToHaveURL(regexp.MustCompile(`/bulk\?`)))
		_, err = ana.GetByTestId("bulk-kind").SelectOption(playwright.SelectOptionValues{Values: &[]string{"reprocess"}})
		must(err)
		must(ana.GetByTestId("bulk-reason").Fill("refund run failed at the PMS; replaying (e2e)"))
		must(ana.GetByTestId("bulk-preview").Click())
		must(expect.Page(ana).ToHaveURL(regexp.MustCompile(`/bulk/[0-9]+$`)))
		actionURL = ana.URL()
		must(expect.Locator(ana.GetByTestId("bulk-total")).ToHaveText("3"))
		eur := ana.GetByTestId("bulk-money-row").Filter(playwright.LocatorFilterOptions{HasText: "EUR"})
		must(expect.Locator(eur.GetByTestId("bulk-sum")).ToHaveText("1,300.50"))
		jpy := ana.GetByTestId("bulk-money-row").Filter(playwright.LocatorFilterOptions{HasText: "JPY"})
		must(expect.Locator(jpy.GetByTestId("bulk-sum")).ToHaveText("5,000"))
		must(expect.Locator(ana.GetByTestId("bulk-needs-approval")).ToContainText("EUR 1300.50 is above 1000.00"))
		shot(ana, "bulk-01-preview")
		must(ana.GetByTestId("bulk-start").Click())
		must(expect.Locator(ana.GetByTestId("flash")).ToContainText("second operator"))
		must(expect.Locator(ana.GetByTestId("bulk-state")).ToHaveText("waiting for approval"))
		must(expect.Locator(ana.GetByTestId("bulk-own-pending")).ToBeVisible())
		must(expect.Locator(ana.GetByTestId("bulk-approve")).ToHaveCount(0))
		shot(ana, "bulk-02-waiting")
	}

	ben := signIn("ben")
	{ // Approve: the second operator finds it among the pending approvals.
		t.Log("step: Approve")
		_, err := ben.Goto("/bulk")
		must(err)
		must(ben.GetByTestId("pending-link").Click())
		rows := ben.GetByTestId("bulk-row")
		must(expect.Locator(rows).ToHaveCount(1))
		must(expect.Locator(rows).ToContainText("ana"))
		shot(ben, "bulk-03-pending")
		must(rows.GetByTestId("bulk-link").Click())
		must(expect.Page(ben).ToHaveURL(actionURL))
		must(ben.GetByTestId("bulk-decision-reason").Fill("checked against the PMS refund report"))
		must(ben.GetByTestId("bulk-approve").Click())
		must(expect.Locator(ben.GetByTestId("flash")).ToContainText("Approved"))
		must(expect.Locator(ben.GetByTestId("bulk-decided")).ToContainText("ben"))
	}

	{ // Done: the requester's page follows the progress by itself (Refresh) to the end.
		t.Log("step: Done")
		_, err := ana.Goto(actionURL)
		must(err)
		must(playwright.NewPlaywrightAssertions(60000).Locator(ana.GetByTestId("bulk-state")).ToHaveText("done"))
		must(expect.Locator(ana.GetByTestId("bulk-changed")).ToHaveText("3"))
		shot(ana, "bulk-04-done")
		_, err = ana.Goto("/audit")
		must(err)
		must(expect.Locator(ana.Locator("body")).ToContainText("approved by ben"))
	}
}
