package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
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
