package web_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// TestConsole_DashboardReadsOnly: the dashboard shows the deliveries received since the
// background roll-up last ran, and showing it writes nothing: the roll-up still has
// them to fold.
func TestConsole_DashboardReadsOnly(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	code, body := c.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	parsePage(t, body).testid("card-money").shows("190.00")
	n, err := e.db.RollupStats(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the dashboard rolled the deliveries up itself")
	}
}

// TestConsole_DashboardClockWarning: the dashboard warns when the last hour's signed
// deliveries say this machine's clock is more than a minute off the senders', in the
// right direction, and says nothing under a minute or without deliveries to tell.
func TestConsole_DashboardClockWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		median time.Duration
		n      int
		want   []string // nil: no warning
	}{
		{"SendersAhead", 2*time.Minute + 5*time.Second, 12, []string{"seems 2 min 5 s behind the senders'", "12 signed deliveries", "timedatectl"}},
		{"SendersBehind", -time.Hour - 3*time.Minute, 4, []string{"seems 1 h 3 min ahead of the senders'", "timedatectl"}},
		{"UnderAMinute", 59 * time.Second, 100, nil},
		{"AMinuteBehind", -time.Minute, 100, nil},
		{"NoDeliveries", 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsoleEnv(t, func(c *web.Config) {
				c.ClockSkew = func() (time.Duration, int) { return tc.median, tc.n }
			})
			code, p := e.as(t, "viewer").page("/")
			if code != http.StatusOK {
				t.Fatalf("GET / = %d", code)
			}
			warning := p.testid("clock-warning")
			if tc.want == nil {
				if warning.len() != 0 {
					t.Fatalf("a warning: %q", warning.text())
				}
				return
			}
			warning.shows(tc.want...)
		})
	}
}

// TestConsole_DashboardCalendarDays: the 30 days are calendar days of the console's
// location, their bars labelled with consecutive dates, and every delivery of the
// window is counted once, in one day and in the totals: across the day summer time ends
// (a 25-hour day) and the day it starts (23 hours), and in a zone half an hour off UTC,
// where storage's UTC hours straddle local midnight and each goes to the day that holds
// its start.
func TestConsole_DashboardCalendarDays(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		lastDay    time.Time // in UTC: the date of the window's last day in the zone
	}{
		{"SummerTimeEnds", "Europe/Berlin", time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)},   // 2026-10-25 is day 18
		{"SummerTimeStarts", "Europe/Berlin", time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)}, // 2026-03-29 is day 17
		{"HalfHourOffset", "Asia/Kolkata", time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := time.LoadLocation(tc.zone)
			if err != nil {
				t.Skip(err)
			}
			e := newConsoleEnv(t, func(c *web.Config) { c.Location = loc })
			y, m, d := tc.lastDay.Date()
			day := func(i int) time.Time { return time.Date(y, m, d-29+i, 0, 0, 0, 0, loc) }
			now := time.Date(y, m, d, 23, 45, 0, 0, loc)
			e.clock.Add(now.Sub(e.clock.Now()))

			// Each day: a delivery in its first hour of UTC when that hour starts the day
			// before (00:10), a number that tells the days apart (00:40), one at noon and one
			// in its last hour (23:40).
			var batch []*storage.Delivery
			want := make([]int64, 30)
			for i := range 30 {
				times := [][2]int{{0, 10}, {12, 0}, {23, 40}} // hour, minute
				for range i%3 + 1 {
					times = append(times, [2]int{0, 40})
				}
				for _, hm := range times {
					at := time.Date(y, m, d-29+i, hm[0], hm[1], 0, 0, loc)
					batch = append(batch, &storage.Delivery{Source: "ota", Key: fmt.Sprintf("k-%d", len(batch)),
						KeyMethod: "event_id", PayloadHash: "h", ReceivedAt: at})
					// The day that holds the start of the UTC hour at falls in; the window's first
					// hour starts before it and goes to its first day.
					holds := max(sort.Search(30, func(j int) bool { return day(j).After(at.Truncate(time.Hour)) })-1, 0)
					want[holds]++
				}
			}
			ctx := context.Background()
			if err := e.db.RecordBatch(ctx, batch, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.db.RollupStats(ctx, 10000); err != nil {
				t.Fatal(err)
			}

			code, p := e.as(t, storage.RoleViewer).page("/?range=30d")
			if code != http.StatusOK {
				t.Fatalf("GET /?range=30d = %d", code)
			}
			var ota []string
			for _, row := range p.testid("source-stats").tag("tr").list {
				if f := strings.Fields((nodes{t, []*html.Node{row}}).text()); len(f) > 1 && f[0] == "ota" {
					ota = f
				}
			}
			if len(ota) < 2 || ota[1] != strconv.Itoa(len(batch)) {
				t.Errorf("ota's row %q: want %d accepted", ota, len(batch))
			}
			charts := p.testid("chart").list
			if len(charts) == 0 {
				t.Fatal("no chart")
			}
			bars := (nodes{t, charts[:1]}).class("bar").tag("title").list
			if len(bars) != 30 {
				t.Fatalf("%d bars, want 30", len(bars))
			}
			var sum int64
			for i, bar := range bars {
				title := (nodes{t, []*html.Node{bar}}).text()
				label, counts, _ := strings.Cut(title, ": ")
				if wantLabel := day(i).Format("Mon Jan 2"); label != wantLabel {
					t.Errorf("bar %d is %q, want %s", i, label, wantLabel)
				}
				n, err := strconv.ParseInt(strings.Fields(counts)[0], 10, 64)
				if err != nil {
					t.Fatalf("bar %d: %q", i, title)
				}
				if n != want[i] {
					t.Errorf("bar %d (%s): %d accepted, want %d", i, label, n, want[i])
				}
				sum += n
			}
			if sum != int64(len(batch)) {
				t.Errorf("the bars hold %d deliveries of %d", sum, len(batch))
			}
		})
	}
}
