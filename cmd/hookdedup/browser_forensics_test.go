//go:build e2e

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBrowserForensics reviews a suspected double in the console as an operator would:
// the flag on the events list, the delivery's page with its link to the other
// delivery, the review with a reason, and the suspects page, the ledger and the audit
// log after it.
func TestBrowserForensics(t *testing.T) {
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
		Args: []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--disable-background-networking", "--disable-component-update",
			"--disable-sync", "--no-first-run"},
	})
	if err != nil {
		t.Fatalf("launch %s: %v", chromium, err)
	}
	t.Cleanup(func() { browser.Close() })

	cs := startConsole(t)
	// The same cancellation sent twice under two event ids: both accepted, both handed
	// downstream. Detection would flag the second; the test flags it as detection does,
	// in the database, and adds the operator who reviews it.
	ota := signature.Config{Scheme: "standard-webhooks", Secrets: []string{e2eOTASecret}}
	body := func(id string) map[string]any {
		b := cancellation("180.00")
		b["event_id"] = id
		return b
	}
	first := cs.send(t, "ota", ota, body("evt_refund_1"), "msg_forensics_1")
	again := cs.send(t, "ota", ota, body("evt_refund_2"), "msg_forensics_2")
	if first["status"] != "accepted" || again["status"] != "accepted" {
		t.Fatalf("answers: %v then %v", first, again)
	}
	const operatorPassword = "the operator's browser-test password"
	{
		db, err := sqlite.Open(cs.database, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var firstID, againID int64
		fmt.Sscan(first["delivery"], &firstID)
		fmt.Sscan(again["delivery"], &againID)
		storagetest.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: againID, Other: firstID,
			Source: "ota", Property: "HTL-LIS-01", Booking: e2eBooking, Amount: "180.00", Currency: "EUR"})
		storagetest.CreateUser(t, db, "olga", storage.RoleOperator, operatorPassword)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}

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

	t.Log("step: SignIn")
	goTo("/login")
	must(page.GetByLabel("Username").Fill("olga"))
	must(page.GetByLabel("Password").Fill(operatorPassword))
	must(byTest("login-submit").Click())
	must(expect.Locator(byTest("whoami")).ToContainText("olga"))
	must(expect.Locator(byTest("dashboard-suspects")).ToContainText("EUR 180.00"))

	t.Log("step: FlagInTheEventsList")
	goTo("/events?flag=any")
	rows := byTest("event-row")
	must(expect.Locator(rows).ToHaveCount(1))
	must(expect.Locator(rows.GetByTestId("flag")).ToContainText("suspected duplicate"))
	shot("forensics-01-events-flagged")
	must(rows.GetByTestId("flag").Click())

	t.Log("step: Review")
	must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/events/` + again["delivery"] + `#flags$`)))
	flags := byTest("flags")
	must(expect.Locator(flags).ToContainText("suspected duplicate"))
	must(expect.Locator(flags.GetByTestId("flag-other")).ToHaveAttribute("href", "/events/"+first["delivery"]))
	must(flags.GetByTestId("review-reason").Fill("refunded twice by the channel, ticket 4711"))
	shot("forensics-02-review")
	must(flags.GetByTestId("review-confirm").Click())
	must(expect.Locator(byTest("flash")).ToContainText("marked a confirmed double"))
	must(expect.Locator(byTest("suspect-state")).ToHaveText("confirmed"))
	must(expect.Locator(byTest("suspect-reason")).ToHaveText("refunded twice by the channel, ticket 4711"))
	must(expect.Locator(byTest("review-form")).ToHaveCount(0))

	t.Log("step: AfterTheReview")
	goTo("/suspects")
	must(expect.Locator(byTest("suspect-row")).ToHaveCount(0))
	goTo("/suspects?state=confirmed")
	must(expect.Locator(byTest("suspect-row")).ToHaveCount(1))
	goTo("/ledger")
	total := byTest("ledger-totals").Locator(`[data-currency="EUR"]`)
	must(expect.Locator(total.GetByTestId("at-risk")).ToContainText("–"))
	must(expect.Locator(total).ToContainText("EUR 180.00"))
	shot("forensics-03-ledger")
	goTo("/audit")
	must(expect.Locator(byTest("audit-row").First()).ToContainText("confirm double"))
	must(expect.Locator(byTest("audit-row").First()).ToContainText("ticket 4711"))
	if len(pageErrors) > 0 {
		t.Fatalf("page errors: %v", pageErrors)
	}
}
