package receiver_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
)

// TestAttack_SampleHeadersBoundedAsStored: a stored sample of an unauthenticated
// rejection keeps "headers cut to 2 KiB", so that junk from many addresses grows the
// database by "at most about 45 KB a minute". The cut counts the bytes received, but
// the headers are stored as JSON, where '<', '>' and '&' take six bytes each (\u003c)
// and so does every invalid UTF-8 byte (\ufffd): a sender who pads with them stores six
// times the bound.
func TestAttack_SampleHeadersBoundedAsStored(t *testing.T) {
	e := newJunkEnv(t, storage.Options{})
	ctx := context.Background()
	before := dbSize(t, e.db.Path())
	pad := strings.Repeat("<", 500)
	const minutes = 5
	for m := range minutes {
		for i := range receiver.DefaultRejectionsTotal {
			req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader(`{}`))
			req.RemoteAddr = fmt.Sprintf("198.51.%d.%d:1000", m, i+1)
			for h := range 8 {
				req.Header.Set(fmt.Sprintf("X-P%d", h), pad)
			}
			w := httptest.NewRecorder()
			e.mux.ServeHTTP(w, req)
			if w.Code != http.StatusNotFound {
				t.Fatalf("junk %d: %d, want 404", i, w.Code)
			}
		}
		e.clock.Add(time.Minute)
	}
	growth := dbSize(t, e.db.Path()) - before
	var stored, largest int
	var column int64
	rows, err := rawDB(t, e.db.Path()).QueryContext(ctx, `SELECT headers FROM deliveries WHERE outcome = 'rejected'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var h http.Header
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatal(err)
		}
		size := 0
		for name, values := range h {
			for _, v := range values {
				size += len(name) + len(v)
			}
		}
		stored++
		largest = max(largest, size)
		column = max(column, int64(len(raw)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples in %d minutes: the largest keeps %d bytes of headers, stored in %d bytes; the database grew by %d bytes a minute",
		stored, minutes, largest, column, growth/minutes)
	if column > 3<<10 {
		t.Errorf("a sample's headers, cut to %d bytes, take %d bytes in the database", largest, column)
	}
	if growth/minutes > 64<<10 {
		t.Errorf("junk from many addresses grew the database by %d bytes a minute, want at most about 45 KB", growth/minutes)
	}
}

// rawDB is a connection of the test's own to the database file at path.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
