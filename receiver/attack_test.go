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

// junkMinutes sends, for each of minutes minutes, as many unauthenticated requests as
// are stored a minute (DefaultRejectionsTotal), each from its own address, to an unknown
// source, each with eight headers of pad. It returns how much the database grew a
// minute, and the largest sample's headers: their size as kept (names and values) and
// as stored (the headers column).
func junkMinutes(t *testing.T, pad string, minutes int) (growth int64, kept, stored int) {
	t.Helper()
	e := newJunkEnv(t, storage.Options{})
	before := dbSize(t, e.db.Path())
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
	growth = (dbSize(t, e.db.Path()) - before) / int64(minutes)

	rows, err := rawDB(t, e.db.Path()).QueryContext(context.Background(),
		`SELECT headers FROM deliveries WHERE outcome = 'rejected'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
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
		n++
		kept, stored = max(kept, size), max(stored, len(raw))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != minutes*receiver.DefaultRejectionsTotal {
		t.Fatalf("%d samples stored, want %d", n, minutes*receiver.DefaultRejectionsTotal)
	}
	t.Logf("%d samples in %d minutes: the largest keeps %d bytes of headers, stored in %d bytes; the database grew by %d bytes a minute",
		n, minutes, kept, stored, growth)
	return growth, kept, stored
}

// TestAttack_SampleHeadersBoundedAsStored: a stored sample of an unauthenticated
// rejection keeps "headers cut to 2 KiB". The cut counts the bytes received, but the
// headers are stored as JSON, where '<', '>' and '&' take six bytes each (\u003c), and
// so does every invalid UTF-8 byte (\ufffd): a sender who pads with them stores six
// times the bound, and junk from many addresses grows the database by about 240 KB a
// minute, not "at most about 45 KB".
func TestAttack_SampleHeadersBoundedAsStored(t *testing.T) {
	growth, kept, stored := junkMinutes(t, strings.Repeat("<", 500), 5)
	if stored > 3<<10 {
		t.Errorf("a sample's headers, cut to %d bytes, take %d bytes in the database", kept, stored)
	}
	if growth > 64<<10 {
		t.Errorf("junk from many addresses grew the database by %d bytes a minute, want at most about 45 KB", growth)
	}
}

// TestAttack_JunkGrowthPerMinute: "at most about 45 KB a minute however many addresses
// send". With plain ASCII headers that fill the 2 KiB a sample keeps, a sample row no
// longer shares its 4 KiB page with another, and twenty a minute take about 80 KB.
func TestAttack_JunkGrowthPerMinute(t *testing.T) {
	growth, _, _ := junkMinutes(t, strings.Repeat("j", 500), 10)
	if growth > 64<<10 {
		t.Errorf("junk from many addresses grew the database by %d bytes a minute, want at most about 45 KB", growth)
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

// TestAttack_JunkNamesKeptForever: unauthenticated rejections are "counted per minute,
// source (or unknown name) and status", and the counts are "kept for retention". But
// each unknown name that is sampled or counted by name also gets rows in the
// dashboard's hourly totals, which no sweep ever deletes: a sender who asks for new
// names each minute adds rows that outlive retention, without end.
func TestAttack_JunkNamesKeptForever(t *testing.T) {
	e := newJunkEnv(t, storage.Options{})
	ctx := context.Background()
	const hours = 3
	for m := range hours * 60 {
		// As many names a minute as are sampled, and as are counted by name.
		for i := range receiver.DefaultRejectionsTotal + 8 {
			req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/webhooks/junk-%d-%d", m, i), strings.NewReader(`{}`))
			req.RemoteAddr = fmt.Sprintf("198.51.%d.%d:1000", m%250, i+1)
			w := httptest.NewRecorder()
			e.mux.ServeHTTP(w, req)
			if w.Code != http.StatusNotFound {
				t.Fatalf("junk: %d, want 404", w.Code)
			}
		}
		e.clock.Add(time.Minute)
		if err := e.rc.FlushRejections(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.RollupStats(ctx, 100000); err != nil {
		t.Fatal(err)
	}

	// Retention (an hour, say) passes; every sweep runs to its end.
	e.clock.Add(2 * time.Hour)
	now := e.clock.Now()
	cutoff := now.Add(-time.Hour)
	var from storage.SweepCursor
	for range 1000 {
		_, next, err := e.db.SweepDeliveries(ctx, now, cutoff, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if from = next; next.Done() {
			break
		}
	}
	for range 1000 {
		n, err := e.db.SweepRejectionCounts(ctx, cutoff, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var rows, junk int64
	err := rawDB(t, e.db.Path()).QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(source)), 0)
		FROM delivery_stats WHERE source LIKE 'junk-%'`).Scan(&rows, &junk)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d hours of junk names and a retention sweep: %d rows of hourly totals name junk sources (%d bytes of names)", hours, rows, junk)
	if rows > hours {
		t.Errorf("%d rows of hourly totals for unknown names outlive retention: junk storage grows without bound", rows)
	}
}
