//go:build load

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The console's figures at scale: the events list, its filters and a key's deliveries
// are meant to answer within 100 ms with millions of deliveries stored. After the load
// runs at the largest size, the harness signs in to the console of the same server and
// times its pages and the JSON API's lists, as a browser or a script would see them:
// each request's whole answer over loopback, the first one (cold) and the median and
// slowest of the next few.

const (
	loadConsoleUser     = "bench"
	loadConsolePassword = "load harness password"
	loadConsoleRepeats  = 5
)

// loadConsoleUserAdd adds the harness's admin user to the database at path and returns
// a bearer token of it for the JSON API. It runs before serve starts: with a user
// already there, serve does not make its first admin.
func loadConsoleUserAdd(t *testing.T, path string) string {
	t.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.UserByName(ctx, loadConsoleUser); err != nil {
		hash, err := bcrypt.GenerateFromPassword([]byte(loadConsolePassword), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateUser(ctx, storage.User{Name: loadConsoleUser, Role: storage.RoleAdmin, PasswordHash: string(hash)}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	token, _, err := db.CreateToken(ctx, loadConsoleUser, "load harness", "load harness")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// loadConsoleTiming is one page's figures.
type loadConsoleTiming struct {
	what, path         string
	first, median, max time.Duration
	bytes              int
}

// loadConsoleClient is a signed-in console session and an API token.
type loadConsoleClient struct {
	t     *testing.T
	base  string
	c     *http.Client
	token string
}

func loadConsoleSignIn(t *testing.T, base, token string) *loadConsoleClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &loadConsoleClient{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 60 * time.Second}, token: token}
	form := url.Values{"username": {loadConsoleUser}, "password": {loadConsolePassword}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Dashboard") {
		t.Fatalf("console sign-in: %d\n%s", resp.StatusCode, tail(body, 500))
	}
	return c
}

// get fetches path (the API's with the token, the console's with the session cookie) and
// returns the body and how long the whole answer took.
func (c *loadConsoleClient) get(path string) (string, time.Duration) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	if strings.HasPrefix(path, "/api/") {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	start := time.Now()
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, tail(body, 500))
	}
	return string(body), took
}

func (c *loadConsoleClient) time(what, path string) loadConsoleTiming {
	body, first := c.get(path)
	tm := loadConsoleTiming{what: what, path: path, first: first, bytes: len(body)}
	var ds []time.Duration
	for range loadConsoleRepeats {
		_, d := c.get(path)
		ds = append(ds, d)
	}
	slices.Sort(ds)
	tm.median, tm.max = ds[len(ds)/2], ds[len(ds)-1]
	return tm
}

var (
	loadEventLink = regexp.MustCompile(`href="/events/(\d+)"`)
	loadMoreLink  = regexp.MustCompile(`before=(\d+)`)
)

// loadConsole times the console on the server s holding stored keys; fillKeys of them
// came from loadFill round fillRound (their keys and bookings are known).
func loadConsole(t *testing.T, s *loadServer, token string, fillRound, fillKeys int) []loadConsoleTiming {
	t.Helper()
	c := loadConsoleSignIn(t, s.base, token)
	var out []loadConsoleTiming
	add := func(what, path string) loadConsoleTiming {
		tm := c.time(what, path)
		out = append(out, tm)
		return tm
	}
	// Ids to open and to page from, found the way a user finds them: by following links.
	idIn := func(path string) string {
		body, _ := c.get(path)
		m := loadEventLink.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no event link in the page", path)
		}
		return m[1]
	}
	i := fillKeys / 2
	fillKey := fmt.Sprintf("msg_%08x_f%d_%d", uint64(i)<<32/uint64(fillKeys), fillRound, i)
	dup := idIn("/events?outcome=duplicate")
	body, _ := c.get("/events")
	next := loadMoreLink.FindStringSubmatch(body)
	if next == nil {
		t.Fatal("GET /events: no link to the next page")
	}
	since := time.Now().Add(-90 * time.Minute).UTC().Format(time.RFC3339)
	until := time.Now().Add(-30 * time.Minute).UTC().Format(time.RFC3339)

	add("dashboard, 24 h", "/")
	add("dashboard, 30 days", "/?range=30d")
	add("events, newest", "/events")
	add("events, next page", "/events?before="+next[1])
	add("events, outcome duplicate", "/events?outcome=duplicate")
	add("events, outcome accepted", "/events?outcome=accepted")
	add("events, mismatches (none)", "/events?mismatch=1")
	add("events, source", "/events?source=ota")
	add("events, property (1 in 400)", "/events?property=PROP-000123")
	add("events, status no row has", "/events?status=confirmed")
	add("events, booking", "/events?booking="+storagetest.BookingOf(fillKey))
	add("events, key", "/events?key="+url.QueryEscape(fillKey))
	add("event with its key's deliveries", "/events/"+dup)
	add("keys, stuck", "/keys")
	add("keys, processed", "/keys?state=processed")
	add("keys, all of a source", "/keys?state=all&source=ota")
	add("keys, none in their state (failed, of a source)", "/keys?state=failed&source=ota")
	add("API deliveries, 500", "/api/v1/deliveries?limit=500")
	add("API deliveries, an hour's", "/api/v1/deliveries?from="+url.QueryEscape(since)+"&to="+url.QueryEscape(until))
	add("API delivery", "/api/v1/deliveries/"+dup)
	add("API key", "/api/v1/key?source=ota&key="+url.QueryEscape(fillKey))
	add("events, money mismatches", "/events?mismatch=money")
	add("events, flagged", "/events?flag=any")
	add("suspects", "/suspects")
	add("ledger, 30 days", "/ledger")
	add("API ledger, 30 days", "/api/v1/ledger")
	return out
}

// loadConsoleReport prints the timings as a markdown table.
func loadConsoleReport(b *strings.Builder, stored string, ts []loadConsoleTiming) {
	fmt.Fprintf(b, "\nconsole and JSON API with %s keys stored (first request, then median and slowest of %d; whole answer over loopback):\n\n", stored, loadConsoleRepeats)
	fmt.Fprintf(b, "| page | path | first ms | median ms | slowest ms | KiB |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, tm := range ts {
		path := tm.path
		if len(path) > 60 {
			path = path[:57] + "..."
		}
		fmt.Fprintf(b, "| %s | `%s` | %.1f | %.1f | %.1f | %.0f |\n", tm.what, path, ms(tm.first), ms(tm.median), ms(tm.max), float64(tm.bytes)/1024)
	}
}
