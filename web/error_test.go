package web_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/web"
)

// logBuffer collects a logger's lines; the server writes them from its own goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestInternalErrorNotShown: a request that fails inside (here, on a closed database)
// gets a 500 whose words are generic, in the console and in the API, and the log gets
// one line with the real error.
func TestInternalErrorNotShown(t *testing.T) {
	var logs logBuffer
	e := newConsoleEnv(t, func(c *web.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := context.Background()
	c := e.as(t, "viewer")
	tok, _, err := e.db.CreateToken(ctx, "viewer", "scripts", "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	// What the server meets: the error of each first look-up, on the closed database.
	_, sessionErr := e.db.SessionByID(ctx, "any")
	_, tokenErr := e.db.TokenUser(ctx, tok)
	if sessionErr == nil || tokenErr == nil || errors.Is(sessionErr, storage.ErrNotFound) {
		t.Fatalf("a closed database answers %v and %v", sessionErr, tokenErr)
	}

	code, body := c.get("/events")
	page := parsePage(t, body)
	if code != http.StatusInternalServerError || !strings.Contains(page.text(), "The server could not complete this request") {
		t.Errorf("console: %d %q, want 500 and the generic words", code, page.text())
	}
	if strings.Contains(body, "database is closed") || strings.Contains(body, "session:") {
		t.Errorf("the console shows the internal error:\n%s", page.text())
	}

	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/keys", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer map[string]string
	if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != http.StatusInternalServerError ||
		answer["error"] != "internal error; it has been logged" {
		t.Errorf("api: %d %s, want 500 and the generic words", resp.StatusCode, raw)
	}

	lines := strings.Split(logs.String(), "\n")
	for _, want := range []struct{ msg, err string }{
		{`msg="console request failed"`, sessionErr.Error()},
		{`msg="api request failed"`, tokenErr.Error()},
	} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, want.msg) {
				n++
				if !strings.Contains(l, want.err) {
					t.Errorf("log line %q lacks the error %q", l, want.err)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d log lines %s, want 1:\n%s", n, want.msg, logs.String())
		}
	}
}

// TestWriteUnavailable: a change that the database cannot store now is answered 503
// with Retry-After, in the console and in the API, and quickly. Under a write lock held
// by another process, while several console and API releases wait on the one write
// connection at once (a console request touches its session first, a write too),
// each is answered within the busy timeout and a second; once the database file has
// left its path, a release is refused, not reported done into a file nobody will open.
func TestWriteUnavailable(t *testing.T) {
	const busy = 300 * time.Millisecond
	e := newConsoleEnvOn(t, sqlite.Options{BusyTimeout: busy})
	ctx := context.Background()
	tok, _, err := e.db.CreateToken(ctx, "operator", "scripts", "test")
	if err != nil {
		t.Fatal(err)
	}
	var consoles []*client
	for range 3 {
		c := e.as(t, "operator")
		c.get("/keys")
		consoles = append(consoles, c)
	}
	e.clock.Add(2 * time.Minute) // each console request now touches its session
	apiRelease := func() (int, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/release",
			strings.NewReader(`{"source":"ota","key":"derived:9f2c","reason":"PMS restored"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	consoleRelease := func(c *client) (int, http.Header) {
		code, _, h := c.post("/keys/release", url.Values{"k": {"ota/derived:9f2c"}, "reason": {"PMS restored"},
			"action": {"release"}, "return": {"/keys"}})
		return code, h
	}

	other, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	check := func(what string, release func() (int, http.Header)) {
		start := time.Now()
		code, h := release()
		took := time.Since(start)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("%s under a foreign lock: %d, Retry-After %q; want 503 with Retry-After", what, code, h.Get("Retry-After"))
		}
		if took > busy+time.Second {
			t.Errorf("%s under a foreign lock answered after %s; the busy timeout is %s, the bound %s",
				what, took.Round(time.Millisecond), busy, busy+time.Second)
		}
	}
	for i, c := range consoles {
		wg.Go(func() {
			check(fmt.Sprintf("console release %d", i), func() (int, http.Header) { return consoleRelease(c) })
		})
		wg.Go(func() { check(fmt.Sprintf("API release %d", i), apiRelease) })
	}
	wg.Wait()
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	if err := os.Remove(e.db.Path()); err != nil {
		t.Fatal(err)
	}
	if code, h := apiRelease(); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("API release once the database file was removed: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}
	if code, h := consoleRelease(consoles[0]); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("console release once the database file was removed: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}
}
