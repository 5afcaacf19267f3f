package receiver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestReady_NotReadyProbesLogBounded: /readyz answers anyone on the public address.
// While the database cannot take writes for a reason Ping sees at once (a full disk,
// the files within 1 MiB of the file size limit, PostgreSQL down), a not-ready answer
// is not reused, so each probe runs a check of its own; the failed checks are logged at
// most once every 10 s, as store failures are, not a line per probe.
//
// The condition here is a documented one, the file size limit (RLIMIT_FSIZE) within
// 1 MiB of the database's files: Ping refuses without touching the database.
func TestReady_NotReadyProbesLogBounded(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	e := newEnvAt(t, path, log)
	if code, body := e.ready(t); code != http.StatusOK {
		t.Fatalf("readyz before: %d %s", code, body)
	}

	// A file size limit half a MiB above the largest of the database's files: every
	// write still fits, and readiness says not ready (within 1 MiB of the limit).
	var largest int64
	for _, name := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(name); err == nil && fi.Size() > largest {
			largest = fi.Size()
		}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(largest) + 512<<10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot set RLIMIT_FSIZE: %v", err)
	}
	time.Sleep(1100 * time.Millisecond) // past the reuse of the ready answer above
	const probes = 200
	codes := map[int]int{}
	for range probes {
		code, _ := e.ready(t)
		codes[code]++
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if codes[http.StatusServiceUnavailable] != probes {
		t.Fatalf("readyz answers near the file size limit: %v, want %d × 503", codes, probes)
	}
	n := strings.Count(logs.String(), `msg="not ready"`)
	if n > 2 {
		first, _, _ := strings.Cut(logs.String(), "\n")
		t.Errorf("%d unauthenticated /readyz probes of a database that cannot take writes wrote %d WARN lines "+
			"(want a bounded few, as store failures are: at most one every 10 s); the first:\n%s", probes, n, first)
	}
}

// scrapeMetric returns the value of the series line of GET /metrics that starts with
// series (name and labels as the exposition writes them), and whether there is one.
func scrapeMetric(t *testing.T, base, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return v, true
		}
	}
	return 0, false
}

// metricLabels returns the label sets of name's series in GET /metrics.
func metricLabels(t *testing.T, base, name string) []string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out []string
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			labels, _, _ := strings.Cut(rest, "}")
			out = append(out, labels)
		}
	}
	return out
}

// TestReject_NotStoredLogBounded: a rejection that could not be stored (a signed
// delivery whose body is not JSON, stored for the console) is logged at most once every
// 10 s, as a delivery that could not be stored is: a sender retrying bad bodies on a
// full disk does not write a line per request.
func TestReject_NotStoredLogBounded(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	src := otaSource(t)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Logger: log}), nil)
	e := &testEnv{db: db, srv: srv, src: src}
	holdWriteLock(t, db.Path(), "BEGIN EXCLUSIVE") // every write fails, as on a full disk
	const n = 30
	for i := range n {
		if code, a, _ := e.post(t, "ota", fmt.Sprintf("msg_bad_%d", i), `not json`, nil); code != http.StatusBadRequest {
			t.Fatalf("signed delivery %d with a body that is not JSON: %d %+v, want 400", i, code, a)
		}
	}
	got := strings.Count(logs.String(), `msg="rejected delivery not stored"`)
	if got > 1 {
		t.Errorf("%d rejections that could not be stored within a few seconds wrote %d WARN lines, want at most 1 "+
			"(store failures are logged at most once every 10 s, with unlogged=N)", n, got)
	}
}

// TestReject_AuthenticatedNotStoredIsCounted: a rejection after the source's check
// passed (400/422, stored with its body) that the database could not take while it was
// locked is counted, as an unauthenticated one is, and the count written once the
// database takes writes again: the metrics and the database agree.
func TestReject_AuthenticatedNotStoredIsCounted(t *testing.T) {
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	src := otaSource(t)
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096})
	srv := serveReceiver(t, rc, nil)
	e := &testEnv{db: db, srv: srv, src: src}
	release := holdWriteLock(t, db.Path(), "BEGIN EXCLUSIVE")
	const n = 5
	for i := range n {
		if code, a, _ := e.post(t, "ota", fmt.Sprintf("msg_bad_%d", i), `not json`, nil); code != http.StatusBadRequest {
			t.Fatalf("signed delivery %d with a body that is not JSON: %d %+v, want 400", i, code, a)
		}
	}
	release()
	if err := rc.FlushRejections(context.Background()); err != nil {
		t.Fatal(err)
	}
	metric, _ := scrapeMetric(t, srv.URL, `hookdedup_deliveries_total{outcome="rejected",source="ota"}`)
	raw := rawDB(t, db.Path())
	var stored, counted, stats int64
	if err := raw.QueryRow(`SELECT COUNT(*) FROM deliveries WHERE outcome = 'rejected'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT COALESCE(SUM(rejections), 0) FROM rejection_counts`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT COALESCE(SUM(deliveries), 0) FROM delivery_stats WHERE outcome = 'rejected'`).Scan(&stats); err != nil {
		t.Fatal(err)
	}
	if metric != n {
		t.Fatalf("metric rejected = %v, want %d", metric, n)
	}
	if stored+counted != n {
		t.Errorf("after the lock: hookdedup_deliveries_total{outcome=rejected} = %v, but the database holds %d rejections "+
			"(%d stored, %d counted; dashboard totals %d): rejections the metrics count are missing from the console",
			metric, stored+counted, stored, counted, stats)
	}
}

// TestMetrics_RejectionReasonLabels: hookdedup_rejections_total's reason is one of the
// documented set: a compressed body (415) is unreadable, and a batched source's body
// that is JSON but not shaped as a batch (422) is an invalid body, not a missing key.
func TestMetrics_RejectionReasonLabels(t *testing.T) {
	documented := map[string]bool{"unknown_source": true, "signature": true, "too_large": true, "timeout": true,
		"unreadable": true, "invalid_body": true, "no_key": true}
	reason := func(labels string) string {
		_, r, _ := strings.Cut(labels, `reason="`)
		r, _, _ = strings.Cut(r, `"`)
		return r
	}

	t.Run("CompressedBody", func(t *testing.T) {
		src := otaSource(t)
		db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
		srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096}), nil)
		e := &testEnv{db: db, srv: srv, src: src}
		code, _, _ := e.post(t, "ota", "msg_gzip", cancellation, func(r *http.Request) { r.Header.Set("Content-Encoding", "gzip") })
		if code != http.StatusUnsupportedMediaType {
			t.Fatalf("gzip: %d, want 415", code)
		}
		for _, l := range metricLabels(t, srv.URL, "hookdedup_rejections_total") {
			if !documented[reason(l)] {
				t.Errorf("a 415 for Content-Encoding is counted as hookdedup_rejections_total{%s}: reason %q is not one the metric documents",
					l, reason(l))
			}
		}
	})

	t.Run("BatchNotShapedAsOne", func(t *testing.T) {
		src := otaSource(t)
		src.Batch = "/events"
		src.Keys = receiver.KeySpec{EventID: []string{"/id"}}
		db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
		srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096}), nil)
		e := &testEnv{db: db, srv: srv, src: src}
		code, a, _ := e.post(t, "ota", "msg_notbatch", `{"events":{"id":"evt_1"}}`, nil)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("a signed body whose batch is an object: %d %+v, want 422", code, a)
		}
		for _, l := range metricLabels(t, srv.URL, "hookdedup_rejections_total") {
			if r := reason(l); r != "invalid_body" {
				t.Errorf("a signed batch that is not an array (%q) is counted as hookdedup_rejections_total{%s}: want reason invalid_body, not %q",
					a.Error, l, r)
			}
		}
	})
}

// TestReady_NotReadyProbesLogBoundedPostgres: the same on PostgreSQL when its server is
// down: each /readyz probe fails at once (connection refused), and the log holds one
// line for them.
func TestReady_NotReadyProbesLogBoundedPostgres(t *testing.T) {
	cluster := postgrestest.NewCluster(t)
	url := cluster.NewDatabase(t, "hookdedup")
	db, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	src := otaSource(t)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Logger: log}), nil)
	e := &testEnv{srv: srv, src: src}
	cluster.Stop(t)
	const probes = 100
	codes := map[int]int{}
	for range probes {
		code, _ := e.ready(t)
		codes[code]++
	}
	cluster.Start(t) // its cleanup stops it
	if codes[http.StatusServiceUnavailable] != probes {
		t.Fatalf("readyz with PostgreSQL down: %v, want %d × 503", codes, probes)
	}
	if n := strings.Count(logs.String(), `msg="not ready"`); n > 2 {
		first, _, _ := strings.Cut(logs.String(), "\n")
		t.Errorf("%d unauthenticated /readyz probes with PostgreSQL down wrote %d WARN lines, want a bounded few; the first:\n%s",
			probes, n, first)
	}
}
