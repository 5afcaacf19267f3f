//go:build load

// The load harness of `make bench`. It builds hookdedup, starts `serve` on
// 127.0.0.1 with a temporary database and a fixed standard-webhooks secret, and drives it
// with wrk and testdata/sign.lua, which signs every request as a provider would. In the
// same run it drives a bare net/http handler (it reads the body and answers JSON, started
// inside this process) the same way, and hookdedup's own intake handler with a store
// that keeps nothing (the ceiling for serve: everything but storage), and prints
// requests/s, p50/p99 latency and their ratio:
//
//   - on an empty database (a fresh file for each run), under synchronous=FULL and NORMAL,
//     with half of the deliveries duplicates and with all of them unique;
//   - while the server's own expiry sweep deletes 1 M expired claims;
//   - with 1 M and 5 M keys already stored (filled through storagetest.BulkLoad),
//     each run followed by one on an empty database, so that the two are compared over
//     the same minutes of this shared machine, and the server's resident memory under
//     load at the largest size;
//   - at the largest size, the console's pages and the JSON API's lists (load_console_test.go);
//   - on an empty PostgreSQL database (load_postgres_test.go), one replica alone and
//     three sharing the load, beside SQLite in the same run;
//   - a claims-only store (load_claims_test.go: the intake handler over one claim row
//     per key in SQLite, group-committed, synchronous=FULL), empty and at each stored
//     size, as the yardstick of serve's CPU per request: what keeping every delivery
//     costs on top of a claim;
//   - a naive reference implementation (testdata/reference.py: FastAPI, claims in an
//     in-process dict), empty and holding 100,000 and 1 M keys, as a baseline (skipped
//     without Debian's python3-fastapi and uvicorn: make bench-deps).
//
// Rows that are compared run side by side: in each run, every row with refund forensics
// on runs next to the same binary's row without them, and BENCH_BASELINE's next to this
// build's with the claims-only store between them, in an order reversed from one run to
// the next, so that the machine's drift over the minutes of a run weighs on both sides
// alike; a ratio of two such rows' CPU is the median of the runs' own ratios.
// PostgreSQL's rows leave the cluster idle (vacuumed, checkpointed) behind them, and the
// cluster is stopped once they are all done, before the scenarios that follow.
//
// Every figure is the median of BENCH_RUNS runs. Figures are reported, never asserted:
// the test fails only when the harness itself is broken (a request answered other than
// 200, a delivery rejected). Knobs, all optional:
//
//	BENCH_KEYS=1000000,5000000  stored-key sizes, ascending (0 skips them)
//	BENCH_SWEEP_KEYS=1000000    expired claims swept during a run (0 skips)
//	BENCH_SYNC=FULL,NORMAL      durability settings measured on the empty database
//	                            (the forensics rows run beside FULL's, and without it not)
//	BENCH_DURATION=10s BENCH_RUNS=3 BENCH_CONNS=64 BENCH_THREADS=2
//	BENCH_PACE=20ms             each sender's wait between an answer and its next
//	                            request in the paced rows (0 skips them)
//	BENCH_DIR=dir               where the databases go (default: a temp dir, removed)
//	BENCH_OUT=file              also write the summary table there (markdown)
//	BENCH_REFERENCE=0           skips the FastAPI reference implementation
//	BENCH_FORENSICS=0           skips the SQLite rows with refund forensics on
//	BENCH_POSTGRES=0            skips PostgreSQL
//	BENCH_PG_REPLICAS=1,3       the PostgreSQL rows' numbers of replicas
//	BENCH_BASELINE=binary       another hookdedup build, whose serve runs beside this
//	                            one's on the empty database (before and after a change),
//	                            on SQLite and on PostgreSQL, and at each stored size on
//	                            a copy of the filled file
//	BENCH_EMPTY=0               skips the empty database's rows at the top (the stored
//	                            sizes' own empty rows beside them still run)
//	BENCH_FILLED=1              BENCH_DIR's stored/ already holds the first stored
//	                            size, as TestLoadFill leaves it: the run starts from it
//	                            instead of filling (and from stored-baseline/ too, if a
//	                            copy of it is there), so that filling gigabytes need not
//	                            happen while others measure
//	BENCH_STORED_CLAIMS=0       skips the claims-only store at the stored sizes
//	BENCH_CONSOLE=0             skips the console's timings at the largest size
//	BENCH_PG_CONSOLE_KEYS=1000000  keys stored for the console's timings on PostgreSQL
//	                            (TestLoadConsolePostgres; 0 skips them)
//	BENCH_PERF=dir              records each serve run's profile there with perf
//	                            (perf record -g), one file a run, named by its
//	                            number, stored keys, mix and process id; the
//	                            figures then include perf's sampling
//
// Each serve row also prints what the server read through system calls (rchar) and the
// minor page faults it took per request, and the size of its -wal file when the run
// ended: past the memory map, those say where a stored size's extra CPU goes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// loadKey is the fixed secret's key: the harness signs with it, serve verifies with it.
var loadKey = sha256.Sum256([]byte("hookdedup load harness"))

type loadKnobs struct {
	keys          []int
	sweepKeys     int
	syncs         []string
	duration      time.Duration
	runs, conns   int
	threads       int
	dir, out, lua string
	baseline      string        // another hookdedup binary, measured beside this one
	forensics     bool          // the SQLite rows with refund forensics on
	empty         bool          // the empty database's rows at the top
	filled        bool          // BENCH_DIR's stored/ holds the first stored size already
	storedClaims  bool          // the claims-only store at the stored sizes
	console       bool          // the console's timings at the largest size
	reference     bool          // the FastAPI reference implementation
	postgres      bool          // the PostgreSQL rows
	pace          time.Duration // the paced rows' wait between an answer and the next request
	perf          string        // where each serve run's perf profile goes, if anywhere
}

func loadEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

func loadReadKnobs(t *testing.T) loadKnobs {
	k := loadKnobs{
		sweepKeys:    loadEnvInt(t, "BENCH_SWEEP_KEYS", 1_000_000),
		duration:     10 * time.Second,
		runs:         loadEnvInt(t, "BENCH_RUNS", 3),
		conns:        loadEnvInt(t, "BENCH_CONNS", 64),
		threads:      loadEnvInt(t, "BENCH_THREADS", 2),
		dir:          os.Getenv("BENCH_DIR"),
		out:          os.Getenv("BENCH_OUT"),
		baseline:     os.Getenv("BENCH_BASELINE"),
		forensics:    os.Getenv("BENCH_FORENSICS") != "0",
		empty:        os.Getenv("BENCH_EMPTY") != "0",
		filled:       os.Getenv("BENCH_FILLED") == "1",
		storedClaims: os.Getenv("BENCH_STORED_CLAIMS") != "0",
		console:      os.Getenv("BENCH_CONSOLE") != "0",
		reference:    os.Getenv("BENCH_REFERENCE") != "0",
		postgres:     os.Getenv("BENCH_POSTGRES") != "0",
		perf:         os.Getenv("BENCH_PERF"),
		pace:         20 * time.Millisecond,
	}
	if p := os.Getenv("BENCH_PACE"); p == "0" {
		k.pace = 0
	} else if p != "" {
		var err error
		if k.pace, err = time.ParseDuration(p); err != nil || k.pace < time.Millisecond {
			t.Fatalf("BENCH_PACE=%q: want 0 or a duration of at least 1ms", p)
		}
	}
	keys := os.Getenv("BENCH_KEYS")
	if keys == "" {
		keys = "1000000,5000000"
	}
	for _, f := range strings.Split(keys, ",") {
		if f = strings.TrimSpace(strings.ReplaceAll(f, "_", "")); f == "" || f == "0" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || (len(k.keys) > 0 && n <= k.keys[len(k.keys)-1]) {
			t.Fatalf("BENCH_KEYS=%q: want ascending positive integers, comma-separated", keys)
		}
		k.keys = append(k.keys, n)
	}
	syncs := os.Getenv("BENCH_SYNC")
	if syncs == "" {
		syncs = "FULL,NORMAL"
	}
	for _, s := range strings.Split(syncs, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s != "FULL" && s != "NORMAL" {
			t.Fatalf("BENCH_SYNC=%q: want FULL and/or NORMAL", syncs)
		}
		k.syncs = append(k.syncs, s)
	}
	if d := os.Getenv("BENCH_DURATION"); d != "" {
		var err error
		if k.duration, err = time.ParseDuration(d); err != nil || k.duration < time.Second {
			t.Fatalf("BENCH_DURATION=%q: want a duration of at least 1s", d)
		}
	}
	if k.runs < 1 || k.conns < 1 || k.threads < 1 {
		t.Fatal("BENCH_RUNS, BENCH_CONNS and BENCH_THREADS must be at least 1")
	}
	lua, err := filepath.Abs("testdata/sign.lua")
	if err != nil {
		t.Fatal(err)
	}
	k.lua = lua
	return k
}

// loadResult is one wrk run.
type loadResult struct {
	Requests     int64   `json:"requests"`
	DurationUS   int64   `json:"duration_us"`
	ErrConnect   int64   `json:"errors_connect"`
	ErrRead      int64   `json:"errors_read"`
	ErrWrite     int64   `json:"errors_write"`
	ErrStatus    int64   `json:"errors_status"`
	ErrTimeout   int64   `json:"errors_timeout"`
	P50US        int64   `json:"p50_us"`
	P90US        int64   `json:"p90_us"`
	P99US        int64   `json:"p99_us"`
	P999US       int64   `json:"p999_us"`
	MaxUS        int64   `json:"max_us"`
	MeanUS       float64 `json:"mean_us"`
	RPS          float64 `json:"-"`
	Load1        float64 `json:"-"`
	Outcomes     loadOutcomes
	CPUPerReq    float64 // CPU time (user+system) the server spent per request, µs
	Swept        float64 // claims the server's sweep deleted during the run
	StoredAtRun  int64   // claims stored when the run began
	ReadPerReq   float64 // bytes the server read through system calls per request (serve only)
	FaultsPerReq float64 // minor page faults the server took per request (serve only)
	WALBytes     int64   // the size of serve's -wal file when the run ended
	Cached       float64 // the share of serve's database file in the file system's cache as the run began
}

// loadOutcomes counts deliveries by outcome, and the suspects that refund forensics
// flagged among them: none is expected, every event of the harness being a booking of
// its own, so that a forensics row measures the checks, not the flagging.
type loadOutcomes struct{ accepted, duplicate, rejected, failed, suspects float64 }

// loadWrk drives url for d with the signing script, each connection sending its next
// request as soon as it has its answer, and returns wrk's figures.
func loadWrk(t *testing.T, k loadKnobs, url, mode string, d time.Duration) loadResult {
	t.Helper()
	return loadWrkPaced(t, k, url, mode, d, 0)
}

// loadWrkPaced is loadWrk with each connection waiting pace between an answer and its
// next request, as a sender with events to send now and then does. wrk times a request
// from when it is written, so the wait is not counted in its latency.
func loadWrkPaced(t *testing.T, k loadKnobs, url, mode string, d, pace time.Duration) loadResult {
	t.Helper()
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.Command("wrk", "-t", strconv.Itoa(k.threads), "-c", strconv.Itoa(k.conns),
		"-d", fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds())), "--timeout", "10s",
		"-s", k.lua, url, "--", mode, nonce, strconv.FormatInt(pace.Milliseconds(), 10))
	cmd.Env = append(os.Environ(), "BENCH_KEY_HEX="+hex.EncodeToString(loadKey[:]))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wrk: %v\n%s%s", err, out, stderr.Bytes())
	}
	var r loadResult
	for line := range strings.Lines(string(out)) {
		if js, ok := strings.CutPrefix(line, "WRKJSON "); ok {
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatalf("wrk output %q: %v", js, err)
			}
			r.RPS = float64(r.Requests) / (float64(r.DurationUS) / 1e6)
			r.Load1 = loadAverage()
			return r
		}
	}
	t.Fatalf("wrk printed no WRKJSON line:\n%s%s", out, stderr.Bytes())
	return r
}

// loadFsync measures the disk under dir: 4 KiB written and fdatasync'ed 200 times. The
// median is what one durable commit waits for at least under synchronous=FULL; the disk
// is shared with whatever else the machine does.
func loadFsync(t *testing.T, dir string) (median, p90 time.Duration) {
	t.Helper()
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 200)
	for i := range lat {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*9/10]
}

func loadAverage() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// loadBare starts the bare handler: it reads the body and answers JSON, nothing else.
func loadBare(t *testing.T) string {
	t.Helper()
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/{source}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || len(body) == 0 {
			http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
			return
		}
		b := fmt.Appendf(nil, `{"status":"accepted","key":%q,"delivery":"%d"}`+"\n", r.Header.Get("Webhook-Id"), n.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
	return loadListen(t, mux)
}

// loadListen serves h on a loopback port until the test ends and returns the URL of the
// harness's source there.
func loadListen(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/webhooks/ota"
}

// loadNoStore starts hookdedup's own intake handler, configured as serve configures the
// harness's source, with a store that keeps nothing and calls every delivery accepted:
// HTTP, the signature check, the canonical JSON and the key, and the answer. Between
// the bare handler and serve, it shows what is left for storage.
func loadNoStore(t *testing.T) string {
	t.Helper()
	var n atomic.Int64
	return loadIntake(t, noStore{id: &n})
}

// loadIntake serves hookdedup's own intake handler over store, configured as serve
// configures the harness's source.
func loadIntake(t *testing.T, store receiver.Store) string {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks",
		Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(loadKey[:])}})
	if err != nil {
		t.Fatal(err)
	}
	rc := receiver.New(receiver.Config{
		Sources: []receiver.Source{{
			Name:     "ota",
			Verifier: v,
			Keys: receiver.KeySpec{EventID: []string{v.DefaultEventID()},
				KeyFields: []string{"/property_id", "/booking_id", "/status", "/effective_date"}},
			TTL:           24 * time.Hour,
			PropertyField: "/property_id", BookingField: "/booking_id", StatusField: "/status",
			AmountField: []string{"/refund/amount"},
		}},
		Store: store,
	})
	mux := http.NewServeMux()
	rc.Register(mux)
	return loadListen(t, mux)
}

// noStore is a receiver.Store that stores nothing and accepts everything.
type noStore struct{ id *atomic.Int64 }

func (s noStore) Record(_ context.Context, d *storage.Delivery, _ storage.ClaimOptions) error {
	d.ID, d.Outcome, d.FirstDelivery, d.Status = s.id.Add(1), storage.Accepted, 0, http.StatusOK
	return nil
}

func (s noStore) RecordBatch(ctx context.Context, items []*storage.Delivery, c storage.ClaimOptions) error {
	for _, d := range items {
		s.Record(ctx, d, c)
	}
	return nil
}

func (noStore) Ping(context.Context) error { return nil }

// loadReference starts the reference implementation (testdata/reference.py:
// FastAPI under uvicorn, one worker, claims in an in-process dict) holding preload keys,
// and returns its URL and how to stop it, or "" when Debian's python3-fastapi and uvicorn
// are missing (`make bench-deps` installs them).
func loadReference(t *testing.T, preload int) (url string, pid string, stop func()) {
	t.Helper()
	const python = "/usr/bin/python3" // Debian's, where its packages are
	if exec.Command(python, "-c", "import fastapi, uvicorn").Run() != nil {
		return "", "", nil
	}
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(python, "-m", "uvicorn", "reference:app", "--app-dir", testdata, "--host", "127.0.0.1",
		"--port", port, "--no-access-log", "--log-level", "warning")
	cmd.Env = append(os.Environ(), "REF_SECRET=whsec_"+base64.StdEncoding.EncodeToString(loadKey[:]),
		"REF_PRELOAD="+strconv.Itoa(preload))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	for range 300 { // a million preloaded keys take a few seconds
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/webhooks/ota", strconv.Itoa(cmd.Process.Pid), stop
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	t.Fatalf("the reference implementation did not start:\n%s", out.Bytes())
	return "", "", nil
}

// loadServer is a running `hookdedup serve`.
type loadServer struct {
	cmd     *exec.Cmd
	base    string
	url     string
	exited  chan struct{}
	logPath string
	db      string // the database file's path
}

// loadMetricsToken opens /metrics, which a server on one address serves to its bearer
// only.
const loadMetricsToken = "load-harness-metrics-token"

var loadListening = regexp.MustCompile(`listening on (http://\S+)`)

// loadServe starts serve on a database file with the given durability setting.
func loadServe(t *testing.T, dir, db, sync string) *loadServer {
	t.Helper()
	return loadServeBinary(t, hookdedupBinary(t), dir, db, sync)
}

// forensicsSummary writes the summary's line of the forensics row on against off, the
// same engine and mix in the same run, each figure the median of the runs' own (they ran
// side by side): the target is 0.9× its requests/s or more.
func forensicsSummary(b *strings.Builder, engine string, on, off *loadRow) {
	tput := on.rpsRatio(off)
	verdict := "MISSED"
	if tput >= 0.9 {
		verdict = "met"
	}
	fmt.Fprintf(b, "- forensics on, %s, %s: %.2f× the requests/s without, %+.0f µs of server CPU a request (target ≥ 0.9×: %s)\n",
		engine, on.mix, tput, on.cpuDiff(off), verdict)
}

// loadForensics is the configuration the forensics rows add to the harness's source:
// a business key and a correlation rule over it and a second source, so that every
// accepted delivery is looked up and indexed twice more in the claim's transaction.
const loadForensics = `business_key = ["/property_id", "/booking_id", "/status", "/refund/amount"]

[[source]]
name      = "payments"
signature = "token"
token_header = "X-Token"
event_id  = "/id"
secret    = "load-harness-token-0123456789"

[[correlation]]
name   = "double-refund"
window = "72h"
  [[correlation.source]]
  name     = "ota"
  booking  = "/booking_id"
  amount   = "/refund/amount"
  currency = "/refund/currency"
  [[correlation.source]]
  name     = "payments"
  booking  = "/booking_id"
  amount   = "/amount"
  currency = "/currency"
`

// loadServeBinary starts serve of the hookdedup binary bin; extra is appended to the
// source's table in its configuration.
func loadServeBinary(t *testing.T, bin, dir, db, sync string, extra ...string) *loadServer {
	t.Helper()
	cfg := filepath.Join(dir, "hookdedup.toml")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(loadKey[:])
	err := os.WriteFile(cfg, fmt.Appendf(nil, `addr = "127.0.0.1:0"
database = %q
synchronous = %q
log_level = "warn"
metrics_token = %q

[[source]]
name         = "ota"
signature    = "standard-webhooks"
secret       = %q
key_fields   = ["/property_id", "/booking_id", "/status", "/effective_date"]
amount_field = "/refund/amount"
%s`, db, sync, loadMetricsToken, secret, strings.Join(extra, "")), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := &loadServer{exited: make(chan struct{}), logPath: filepath.Join(dir, "serve.log"), db: db}
	s.cmd = exec.Command(bin, "serve", "--config", cfg)
	s.cmd.Dir = dir
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd.Stderr = logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		defer close(s.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := loadListening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		s.cmd.Wait()
	}()
	select {
	case base := <-found:
		s.base, s.url = base, base+"/webhooks/ota"
	case <-s.exited:
		log, _ := os.ReadFile(s.logPath)
		t.Fatalf("serve exited before listening:\n%s", log)
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		t.Fatal("serve did not listen within 60s")
	}
	t.Cleanup(s.stop)
	return s
}

func (s *loadServer) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// metrics reads the server's counters of outcomes and swept claims.
func (s *loadServer) metrics(t *testing.T) (loadOutcomes, float64) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+loadMetricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o loadOutcomes
	var swept float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		switch {
		case strings.HasPrefix(name, "hookdedup_deliveries_total{") && strings.Contains(name, `source="ota"`):
			switch {
			case strings.Contains(name, `outcome="accepted"`):
				o.accepted = v
			case strings.Contains(name, `outcome="duplicate"`):
				o.duplicate = v
			case strings.Contains(name, `outcome="rejected"`):
				o.rejected = v
			case strings.Contains(name, `outcome="error"`):
				o.failed = v
			}
		case strings.HasPrefix(name, "hookdedup_suspects_total{"):
			o.suspects += v
		case strings.HasPrefix(name, "hookdedup_sweep_deleted_total{") && strings.Contains(name, `table="claims"`):
			swept = v
		}
	}
	return o, swept
}

// run drives the server once and attaches what its metrics say happened.
func (s *loadServer) run(t *testing.T, k loadKnobs, mode string, stored int64) loadResult {
	t.Helper()
	return s.runPaced(t, k, mode, stored, 0)
}

// runPaced is run with each connection waiting pace between an answer and its next
// request (loadWrkPaced).
func (s *loadServer) runPaced(t *testing.T, k loadKnobs, mode string, stored int64, pace time.Duration) loadResult {
	t.Helper()
	cached := loadCached(s.db)
	o0, sw0 := s.metrics(t)
	pid := strconv.Itoa(s.cmd.Process.Pid)
	stopPerf := loadPerf(t, k, pid, fmt.Sprintf("%d-%s-%s", stored, mode, pid))
	cpu0, read0, faults0 := postgrestest.ProcessCPU(pid), storagetest.ProcessIO(pid).Read, storagetest.MinorFaults(pid)
	r := loadWrkPaced(t, k, s.url, mode, k.duration, pace)
	stopPerf()
	if r.Requests > 0 {
		r.CPUPerReq = float64((postgrestest.ProcessCPU(pid) - cpu0).Microseconds()) / float64(r.Requests)
		r.ReadPerReq = float64(storagetest.ProcessIO(pid).Read-read0) / float64(r.Requests)
		r.FaultsPerReq = float64(storagetest.MinorFaults(pid)-faults0) / float64(r.Requests)
	}
	if fi, err := os.Stat(s.db + "-wal"); err == nil {
		r.WALBytes = fi.Size()
	}
	// Requests still in flight when wrk stopped finish now: wait until the counters
	// settle, so that they count in this run and not the next.
	o1, sw1 := s.metrics(t)
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		o2, sw2 := s.metrics(t)
		if o2 == o1 {
			break
		}
		o1, sw1 = o2, sw2
	}
	r.Outcomes = loadOutcomes{o1.accepted - o0.accepted, o1.duplicate - o0.duplicate,
		o1.rejected - o0.rejected, o1.failed - o0.failed, o1.suspects - o0.suspects}
	r.Swept = sw1 - sw0
	r.StoredAtRun = stored
	r.Cached = cached
	// wrk hangs up on the requests in flight when its time is up; those that had not yet
	// reached the writer are not stored ("error", context canceled), which is right. Any
	// answer other than 200 while wrk listened, or a rejection, means the harness is
	// broken and its figures meaningless.
	if r.ErrStatus > 0 || r.Outcomes.rejected > 0 || r.Outcomes.failed > float64(k.conns) {
		log, _ := os.ReadFile(s.logPath)
		t.Errorf("%s run: %d answers other than 2xx, %v rejected, %v not stored; serve log:\n%s",
			mode, r.ErrStatus, r.Outcomes.rejected, r.Outcomes.failed, tail(log, 2000))
	}
	return r
}

// loadPerf starts perf recording the process pid's call stacks into BENCH_PERF, in a
// file named by name and the run's number, and returns what stops it, waiting for perf
// to write its file; without BENCH_PERF it does nothing. The profile covers what wrk
// measures, not serve's start. The number keeps apart the runs that one server serves
// at the same size and mix (the sweep's): under one name perf keeps only the last two.
// A run that fails before its end stops perf too.
func loadPerf(t *testing.T, k loadKnobs, pid, name string) (stop func()) {
	t.Helper()
	if k.perf == "" {
		return func() {}
	}
	if err := os.MkdirAll(k.perf, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(k.perf, fmt.Sprintf("%03d-%s.data", loadPerfRuns.Add(1), name))
	cmd := exec.Command("perf", "record", "-F", "997", "-g", "-p", pid, "-o", out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("BENCH_PERF: %v", err)
	}
	stop = sync.OnceFunc(func() {
		cmd.Process.Signal(os.Interrupt)
		// perf that could not record (perf_event_paranoid, no such process) says so
		// only on its stderr, and the profile asked for would silently be missing. One
		// that did ends by raising the interrupt again, once its file is written.
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			err = nil
		}
		if err != nil {
			t.Errorf("BENCH_PERF: perf record into %s: %v\n%s", out, err, tail(stderr.Bytes(), 2000))
		}
	})
	t.Cleanup(stop)
	return stop
}

// loadPerfRuns numbers the profiles of BENCH_PERF (loadPerf).
var loadPerfRuns atomic.Int64

// loadCached is the share of the file at path whose pages the file system's cache
// holds (mincore over a map of it), 0 where that cannot be known. Past SQLite's memory
// map a stored size's new keys read their index leaves through that cache: a file
// pushed out of it (by a fill, a copy, other processes' files) is read from the disk
// again, which a run's CPU and requests/s show.
func loadCached(path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0
	}
	defer syscall.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// rss reads the resident size, its high-water mark and its anonymous part (the
// process's own memory: the rest is mostly the memory-mapped database file, pages of
// the file system's cache) of process pid, in MiB.
func rss(pid int) (vmRSS, vmHWM, anon float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			vmRSS = kb / 1024
		case "VmHWM:":
			vmHWM = kb / 1024
		case "RssAnon:":
			anon = kb / 1024
		}
	}
	return vmRSS, vmHWM, anon
}

// loadFill stores n live (or, expired, swept-to-be) claims of round round, each with its
// delivery, spread over the key space that sign.lua's event ids use.
func loadFill(t *testing.T, path string, round, n int, expired bool) {
	t.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f := storagetest.Fill{
		Source:    "ota",
		Keys:      n,
		ClaimedAt: now.Add(-time.Hour),
		TTL:       24 * time.Hour,
		Key:       loadFillKey(round, n),
		Headers: `{"Content-Length":["612"],"Content-Type":["application/json"],"User-Agent":["hookdedup-bench/fill"],` +
			`"Webhook-Id":["msg_fill"],"Webhook-Signature":["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="],"Webhook-Timestamp":["1764441727"]}`,
		Body: func(i int) []byte { return loadFillBody(i) },
	}
	if expired {
		f.ClaimedAt = now.Add(-48 * time.Hour)
	}
	start := time.Now()
	last := time.Now()
	err = storagetest.BulkLoad(context.Background(), db, f, func(done int) {
		if time.Since(last) > 15*time.Second {
			fmt.Printf("    ... %d of %d keys (%.0f/s)\n", done, n, float64(done)/time.Since(start).Seconds())
			last = time.Now()
		}
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	// Whatever of the fill is still dirty in the OS cache is flushed before serve is
	// measured, so that its writeback is not charged to serve. (SQLite's own checkpoints
	// leave little: this takes well under a second. A seed database copied in with cp
	// and not flushed made the p99 at 1 M keys 2-3 times higher in manual runs.)
	syncStart := time.Now()
	syscall.Sync()
	fmt.Printf("  filled %d %s keys in %s (%.0f keys/s), flushed to disk in %s\n", n,
		map[bool]string{true: "expired", false: "live"}[expired], time.Since(start).Round(time.Second),
		float64(n)/time.Since(start).Seconds(), time.Since(syncStart).Round(time.Second))
}

// loadFillKey is the key of the i-th of the n keys that round round of loadFill stores.
func loadFillKey(round, n int) func(i int) string {
	return func(i int) string {
		return fmt.Sprintf("msg_%08x_f%d_%d", uint64(i)<<32/uint64(n), round, i)
	}
}

func loadFillBody(i int) []byte {
	return fmt.Appendf(nil, `{"event_id":"fill-%d","type":"booking.cancelled","created_at":"2025-11-29T18:42:07Z",`+
		`"property_id":"PROP-%06d","booking_id":"BK-f-%d","status":"cancelled","effective_date":"2025-12-20",`+
		`"channel":"booking.com","guest":{"name":"A. Guest","country":"DE"},"stay":{"arrival":"2025-12-20",`+
		`"departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL","rate_plan":"BAR-FLEX","adults":2,`+
		`"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},"refund":{"amount":"412.50",`+
		`"currency":"EUR","reason":"guest_request","policy":"free_cancellation"},"cancellation":`+
		`{"id":"CXL-%d","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}`, i, i%400, i, i)
}

// loadRow is one line of the summary: the medians of a scenario's runs.
type loadRow struct {
	scenario, mix string
	runs          []loadResult
	note          string
	claims        *loadRow // the claims-only store's row of the same mix and size
	empty         *loadRow // a stored size's: the empty database's row measured between its runs
}

func (r loadRow) cpu() float64 { return r.med(func(x loadResult) float64 { return x.CPUPerReq }) }

// cpuRatio is r's CPU a request over o's: the median of the ratios of the runs that ran
// side by side (the n-th of each row), so that one run slowed by the machine's other work
// weighs once, on both sides, rather than moving either median alone. Rows of different
// run counts fall back to the ratio of their medians.
func (r loadRow) cpuRatio(o *loadRow) float64 {
	return r.beside(o, func(a, b loadResult) float64 { return a.CPUPerReq / b.CPUPerReq },
		func() float64 { return r.cpu() / o.cpu() })
}

// rpsRatio is r's requests/s over o's, side by side as cpuRatio.
func (r loadRow) rpsRatio(o *loadRow) float64 {
	return r.beside(o, func(a, b loadResult) float64 { return a.RPS / b.RPS },
		func() float64 { return r.rps() / o.rps() })
}

// cpuDiff is r's CPU a request less o's, in µs, side by side as cpuRatio.
func (r loadRow) cpuDiff(o *loadRow) float64 {
	return r.beside(o, func(a, b loadResult) float64 { return a.CPUPerReq - b.CPUPerReq },
		func() float64 { return r.cpu() - o.cpu() })
}

// beside is the median of f over the runs of r and o that ran side by side (the n-th
// of each), or apart() when their run counts differ.
func (r loadRow) beside(o *loadRow, f func(a, b loadResult) float64, apart func() float64) float64 {
	if len(r.runs) != len(o.runs) {
		return apart()
	}
	xs := make([]float64, len(r.runs))
	for i := range r.runs {
		xs[i] = f(r.runs[i], o.runs[i])
	}
	return median(xs)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r loadRow) med(f func(loadResult) float64) float64 {
	xs := make([]float64, len(r.runs))
	for i, x := range r.runs {
		xs[i] = f(x)
	}
	return median(xs)
}

func (r loadRow) rps() float64 { return r.med(func(x loadResult) float64 { return x.RPS }) }
func (r loadRow) p50() float64 {
	return r.med(func(x loadResult) float64 { return float64(x.P50US) / 1000 })
}
func (r loadRow) p99() float64 {
	return r.med(func(x loadResult) float64 { return float64(x.P99US) / 1000 })
}

func TestLoad(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatal("wrk is not installed: run `make bench-deps` (apt-get install wrk)")
	}
	k := loadReadKnobs(t)
	// The rows served in this process (the bare handler, the intake handler, the
	// claims-only store) are the yardsticks of serve's CPU a request: they collect
	// garbage at serve's target, so that a ratio to them measures what serve does, not
	// the two processes' collectors. GOGC, when set, reaches both alike.
	if os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(serveGCPercent)
		t.Cleanup(func() { debug.SetGCPercent(prev) })
	}
	dir := k.dir
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("load harness: %d cores, %s, wrk -t%d -c%d -d%s, %d runs per figure (median), load average %.2f\n",
		runtime.NumCPU(), runtime.Version(), k.threads, k.conns, k.duration, k.runs, loadAverage())
	probe := func(when string) {
		m, p := loadFsync(t, dir)
		fmt.Printf("disk %s: fdatasync of 4 KiB median %.2f ms (%.0f/s), p90 %.2f ms; load average %.2f\n",
			when, m.Seconds()*1000, 1/m.Seconds(), p.Seconds()*1000, loadAverage())
	}
	probe("before")
	defer probe("after")
	var rows []*loadRow
	row := func(scenario, mix string) *loadRow {
		r := &loadRow{scenario: scenario, mix: mix}
		rows = append(rows, r)
		return r
	}
	report := func(r *loadRow, x loadResult) {
		r.runs = append(r.runs, x)
		fmt.Printf("  %-30s %-6s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  cpu %5.0f µs/req  accepted %-7.0f duplicate %-7.0f swept %-7.0f load %.2f\n",
			r.scenario, r.mix, x.RPS, float64(x.P50US)/1000, float64(x.P99US)/1000, x.CPUPerReq,
			x.Outcomes.accepted, x.Outcomes.duplicate, x.Swept, x.Load1)
		if x.ReadPerReq > 0 || x.WALBytes > 0 {
			fmt.Printf("    read %.1f KB and %.2f page faults a request; -wal %.1f MiB at the end; %.0f %% of the file cached at the start\n",
				x.ReadPerReq/1000, x.FaultsPerReq, float64(x.WALBytes)/(1<<20), 100*x.Cached)
		}
		if x.Outcomes.suspects > 0 {
			fmt.Printf("    (%.0f suspects flagged: this run's figures include flagging them)\n", x.Outcomes.suspects)
		}
	}

	// 1. Empty database, each run on a fresh file, interleaved with the bare handler so
	// that the machine's drift touches both alike.
	bare, noStoreURL := loadBare(t), loadNoStore(t)
	bareRow := row("bare net/http handler", "-")
	noStoreRow := row("intake handler, nothing stored", "-")
	claimsRows := map[string]*loadRow{}
	for _, mix := range []string{"half", "unique"} {
		claimsRows[mix] = row("claims-only store, empty", mix)
	}
	emptyRows := map[string]*loadRow{}
	for _, sync := range k.syncs {
		for _, mix := range []string{"half", "unique"} {
			emptyRows[sync+mix] = row("empty, synchronous="+sync, mix)
			emptyRows[sync+mix].claims = claimsRows[mix]
		}
	}
	forensicsRows := map[string]*loadRow{}
	for _, mix := range []string{"half", "unique"} {
		if k.forensics {
			forensicsRows[mix] = row("empty, FULL, forensics on", mix)
			forensicsRows[mix].claims = claimsRows[mix]
		}
	}
	// The paced rows: the same server on an empty database, each sender waiting
	// BENCH_PACE between an answer and its next request, so that the latency measured
	// is a delivery's own and not mostly its wait behind the other senders' requests.
	pacedRows := map[string]*loadRow{}
	if k.pace > 0 {
		for _, mix := range []string{"half", "unique"} {
			pacedRows[mix] = row(fmt.Sprintf("empty, FULL, each sender %s apart", k.pace), mix)
		}
	}
	var pgRows []*loadPostgresRow
	if k.postgres {
		for _, replicas := range loadPostgresReplicas(t) {
			for _, mix := range []string{"half", "unique"} {
				name := "PostgreSQL, 1 replica"
				if replicas > 1 {
					name = fmt.Sprintf("PostgreSQL, %d replicas", replicas)
				}
				if k.baseline != "" {
					pgRows = append(pgRows, &loadPostgresRow{loadRow: row("BENCH_BASELINE, "+name+", empty", mix),
						replicas: replicas, bin: k.baseline})
				}
				pgRows = append(pgRows, &loadPostgresRow{loadRow: row(name+", empty", mix), replicas: replicas})
				if replicas == 1 {
					if k.baseline != "" {
						pgRows = append(pgRows, &loadPostgresRow{loadRow: row("BENCH_BASELINE, "+name+", forensics on", mix),
							replicas: replicas, bin: k.baseline, extra: loadForensics})
					}
					pgRows = append(pgRows, &loadPostgresRow{loadRow: row(name+", forensics on", mix), replicas: replicas,
						extra: loadForensics})
				}
			}
		}
	}
	baselineRows := map[string]*loadRow{}
	if k.baseline != "" {
		for _, mix := range []string{"half", "unique"} {
			baselineRows[mix] = row("BENCH_BASELINE, empty, synchronous=FULL", mix)
			baselineRows[mix].claims = claimsRows[mix]
		}
	}
	baselineForensicsRows := map[string]*loadRow{}
	if k.baseline != "" && k.forensics {
		for _, mix := range []string{"half", "unique"} {
			baselineForensicsRows[mix] = row("BENCH_BASELINE, FULL, forensics on", mix)
			baselineForensicsRows[mix].claims = claimsRows[mix]
		}
	}
	// inProcess drives a server of this process's own and charges it this process's CPU.
	inProcess := func(url, mode string, r *loadRow) {
		cpu0 := postgrestest.ProcessCPU("self")
		x := loadWrk(t, k, url, mode, k.duration)
		x.CPUPerReq = float64((postgrestest.ProcessCPU("self") - cpu0).Microseconds()) / float64(max(x.Requests, 1))
		if x.ErrStatus+x.ErrRead+x.ErrTimeout > 0 {
			t.Fatalf("%s: %d answers other than 200, %d read errors, %d timeouts", r.scenario,
				x.ErrStatus, x.ErrRead, x.ErrTimeout)
		}
		report(r, x)
	}
	emptyRuns := k.runs
	if !k.empty {
		emptyRuns = 0
		fmt.Println("empty database: skipped (BENCH_EMPTY=0)")
	} else {
		fmt.Println("empty database:")
	}
	// A short warm-up of both servers, discarded.
	if emptyRuns > 0 {
		loadWrk(t, k, bare, "unique", 2*time.Second)
		loadWrk(t, k, noStoreURL, "unique", 2*time.Second)
	}
	// Each binary's serve is warmed up once, on a database thrown away, so that the
	// first row measured is not the only one to start cold.
	bins := []string{hookdedupBinary(t)}
	if k.baseline != "" {
		bins = append(bins, k.baseline)
	}
	for _, bin := range bins {
		if emptyRuns == 0 {
			break
		}
		sub := filepath.Join(dir, "warm-up")
		os.MkdirAll(sub, 0o755)
		s := loadServeBinary(t, bin, sub, filepath.Join(sub, "hookdedup.db"), "FULL", loadForensics)
		loadWrk(t, k, s.url, "unique", 2*time.Second)
		s.stop()
		os.RemoveAll(sub)
	}
	// serveRun is one run of a SQLite row on a fresh database file: serve of bin, extra
	// added to its configuration, or without bin the claims-only store.
	type serveRun struct {
		row   *loadRow
		bin   string
		sync  string
		extra string
	}
	for i := range emptyRuns {
		for _, in := range []struct {
			url string
			row *loadRow
		}{{bare, bareRow}, {noStoreURL, noStoreRow}} {
			inProcess(in.url, "unique", in.row)
		}
		// The rows that are compared with one another run side by side: each row with
		// forensics on next to the same binary's without them, the claims-only store
		// between BENCH_BASELINE's and this build's, in an order that alternates from run
		// to run (and between the mixes), so that whatever the machine does meanwhile
		// weighs on both sides alike. The claims-only store is the serveRun without a
		// binary: it runs in this process.
		for m, mix := range []string{"half", "unique"} {
			var group []serveRun
			full := slices.Contains(k.syncs, "FULL")
			if full && k.baseline != "" {
				if k.forensics {
					group = append(group, serveRun{baselineForensicsRows[mix], k.baseline, "FULL", loadForensics})
				}
				group = append(group, serveRun{baselineRows[mix], k.baseline, "FULL", ""})
			}
			group = append(group, serveRun{row: claimsRows[mix]})
			if full {
				group = append(group, serveRun{emptyRows["FULL"+mix], bins[0], "FULL", ""})
				if k.forensics {
					group = append(group, serveRun{forensicsRows[mix], bins[0], "FULL", loadForensics})
				}
			}
			for _, sync := range k.syncs {
				if sync != "FULL" {
					group = append(group, serveRun{emptyRows[sync+mix], bins[0], sync, ""})
				}
			}
			if (i+m)%2 == 1 {
				slices.Reverse(group)
			}
			for j, g := range group {
				sub := filepath.Join(dir, fmt.Sprintf("empty-%s-%d-%d", mix, i, j))
				os.MkdirAll(sub, 0o755)
				if g.bin == "" {
					url, c := loadClaimsOnly(t, sub)
					inProcess(url, mix, g.row)
					c.close()
				} else {
					s := loadServeBinary(t, g.bin, sub, filepath.Join(sub, "hookdedup.db"), g.sync, g.extra)
					report(g.row, s.run(t, k, mix, 0))
					s.stop()
				}
				os.RemoveAll(sub)
			}
		}
		for _, pair := range postgresPairs(pgRows, i) {
			for _, r := range pair {
				runPostgres(t, k, dir, r, r.mix, i, report)
			}
		}
	}
	if len(pgRows) > 0 {
		// Nothing of PostgreSQL's runs into the scenarios that follow.
		if err := postgrestest.Stop(); err != nil {
			t.Error(err)
		}
	}
	if k.pace > 0 && emptyRuns > 0 {
		fmt.Printf("empty database, each of %d senders waiting %s between an answer and its next request:\n", k.conns, k.pace)
		for i := range emptyRuns {
			for _, mix := range []string{"half", "unique"} {
				sub := filepath.Join(dir, fmt.Sprintf("paced-%s-%d", mix, i))
				os.MkdirAll(sub, 0o755)
				s := loadServe(t, sub, filepath.Join(sub, "hookdedup.db"), "FULL")
				report(pacedRows[mix], s.runPaced(t, k, mix, 0, k.pace))
				s.stop()
				os.RemoveAll(sub)
			}
		}
	}

	// The reference implementation on this machine: empty and holding 100,000 and 1 M
	// keys; a fresh process for each run, since every run adds keys. Half duplicates.
	refSizes := []int{0, 100_000, 1_000_000}
	refRows := map[int]*loadRow{}
	if !k.reference {
		fmt.Println("reference implementation: skipped (BENCH_REFERENCE=0)")
	} else if url, _, stop := loadReference(t, 0); url == "" {
		fmt.Println("reference implementation: skipped (python3-fastapi and uvicorn missing: make bench-deps)")
	} else {
		stop()
		fmt.Println("reference implementation (testdata/reference.py: FastAPI, in-process dict):")
		for _, n := range refSizes {
			name := "reference, empty"
			if n > 0 {
				name = "reference, " + loadCount(n) + " keys held"
			}
			refRows[n] = row(name, "half")
			for range k.runs {
				url, pid, stop := loadReference(t, n)
				cpu0 := postgrestest.ProcessCPU(pid)
				x := loadWrk(t, k, url, "half", k.duration)
				x.CPUPerReq = float64((postgrestest.ProcessCPU(pid) - cpu0).Microseconds()) / float64(max(x.Requests, 1))
				stop()
				if x.ErrStatus+x.ErrRead+x.ErrTimeout > 0 {
					t.Fatalf("%s: %d answers other than 200, %d read errors, %d timeouts", refRows[n].scenario,
						x.ErrStatus, x.ErrRead, x.ErrTimeout)
				}
				report(refRows[n], x)
			}
		}
	}

	// 2. A sweep of expired claims running under load: the server sweeps at start.
	var sweepRow *loadRow
	if k.sweepKeys > 0 {
		fmt.Printf("sweep of %d expired claims (the server's own sweep):\n", k.sweepKeys)
		sub := filepath.Join(dir, "sweep")
		os.MkdirAll(sub, 0o755)
		path := filepath.Join(sub, "hookdedup.db")
		loadFill(t, path, 0, k.sweepKeys, true)
		sweepRow = row(fmt.Sprintf("during a sweep of %s expired", loadCount(k.sweepKeys)), "half")
		s := loadServe(t, sub, path, "FULL")
		start := time.Now()
		for range k.runs {
			x := s.run(t, k, "half", int64(k.sweepKeys))
			report(sweepRow, x)
		}
		_, swept := s.metrics(t)
		if swept < float64(k.sweepKeys) {
			fmt.Printf("  the sweep was still running after the runs: %.0f of %d deleted in %s\n",
				swept, k.sweepKeys, time.Since(start).Round(time.Second))
		} else {
			sweepRow.note = "the sweep finished during the runs"
			fmt.Printf("  the sweep finished during the runs (%.0f deleted)\n", swept)
		}
		s.stop()
		os.RemoveAll(sub)
	}

	// 3. Millions of keys already stored: one file, filled up size by size.
	var sizeRows []*loadRow
	var baselineSized [][2]*loadRow // BENCH_BASELINE's row at a stored size, and this build's
	var peakRSS, hwm, peakAnon float64
	var consoleAt string
	var consoleTimes []loadConsoleTiming
	if len(k.keys) > 0 {
		sub := filepath.Join(dir, "stored")
		os.MkdirAll(sub, 0o755)
		path := filepath.Join(sub, "hookdedup.db")
		stored := int64(0)
		if k.filled && k.dir == "" {
			t.Fatal("BENCH_FILLED=1 needs BENCH_DIR, where TestLoadFill filled stored/")
		}
		var claimsURL string
		var claims *claimsOnly
		if k.storedClaims {
			claimsURL, claims = loadClaimsOnly(t, sub)
		}
		for round, n := range k.keys {
			fmt.Printf("%s keys stored:\n", loadCount(n))
			fillKeys := n - int(stored)
			if round == 0 && k.filled {
				fmt.Printf("  filled before the run (BENCH_FILLED=1)\n")
			} else {
				loadFill(t, path, round+1, fillKeys, false)
				if k.storedClaims {
					claims.fill(t, "ota", 0, fillKeys, loadFillKey(round+1, fillKeys))
				}
			}
			stored = int64(n)
			last := round == len(k.keys)-1
			var token string
			console := last && k.console
			if console {
				token = loadConsoleUserAdd(t, path)
			}
			// BENCH_BASELINE's serve runs on a copy of the file as filled, beside this
			// build's, each run of one followed by the same run of the other.
			var base *loadServer
			var baseHalf, baseUnique *loadRow
			if k.baseline != "" {
				baseSub := filepath.Join(dir, "stored-baseline")
				if _, err := os.Stat(filepath.Join(baseSub, "hookdedup.db")); round == 0 && k.filled && err == nil {
					fmt.Printf("  copied for BENCH_BASELINE before the run (BENCH_FILLED=1)\n")
				} else {
					os.RemoveAll(baseSub)
					os.MkdirAll(baseSub, 0o755)
					copyStart := time.Now()
					if out, err := exec.Command("cp", path, filepath.Join(baseSub, "hookdedup.db")).CombinedOutput(); err != nil {
						t.Fatalf("copy the filled database for BENCH_BASELINE: %v: %s", err, out)
					}
					syscall.Sync()
					fmt.Printf("  copied for BENCH_BASELINE in %s\n", time.Since(copyStart).Round(time.Second))
				}
				base = loadServeBinary(t, k.baseline, baseSub, filepath.Join(baseSub, "hookdedup.db"), "FULL")
				loadWrk(t, k, base.url, "unique", 3*time.Second)
				baseHalf = row("BENCH_BASELINE, "+loadCount(n)+" keys stored", "half")
				baseUnique = row("BENCH_BASELINE, "+loadCount(n)+" keys stored", "unique")
				defer os.RemoveAll(baseSub)
			}
			s := loadServe(t, sub, path, "FULL")
			stopSampling := make(chan struct{})
			sampled := make(chan struct{})
			if last {
				go func() {
					defer close(sampled)
					tick := time.NewTicker(250 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stopSampling:
							return
						case <-tick.C:
							r, h, a := rss(s.cmd.Process.Pid)
							peakRSS, hwm, peakAnon = max(peakRSS, r), max(hwm, h), max(peakAnon, a)
						}
					}
				}()
			} else {
				close(sampled)
			}
			// A short warm-up after the restart, discarded: the figures are for a server
			// that has been running, not for its first seconds on cold caches.
			loadWrk(t, k, s.url, "unique", 3*time.Second)
			if k.storedClaims {
				loadWrk(t, k, claimsURL, "unique", 3*time.Second)
			}
			half, unique := row(loadCount(n)+" keys stored", "half"), row(loadCount(n)+" keys stored", "unique")
			claimsHalf := row("claims-only store, "+loadCount(n)+" keys stored", "half")
			claimsUnique := row("claims-only store, "+loadCount(n)+" keys stored", "unique")
			half.claims, unique.claims = claimsHalf, claimsUnique
			// The empty database is measured again between the stored size's runs: the
			// flat target's ratio would otherwise compare runs minutes apart, and the
			// load of a shared machine moves over minutes by more than a million keys
			// move the figures.
			emptyHalf := row("empty, beside "+loadCount(n)+" keys stored", "half")
			emptyUnique := row("empty, beside "+loadCount(n)+" keys stored", "unique")
			half.empty, unique.empty = emptyHalf, emptyUnique
			sizeRows = append(sizeRows, half, unique)
			if base != nil {
				baselineSized = append(baselineSized, [2]*loadRow{baseHalf, half}, [2]*loadRow{baseUnique, unique})
			}
			for i := range k.runs {
				for _, r := range []*loadRow{half, unique} {
					x := s.run(t, k, r.mix, stored)
					stored += int64(x.Outcomes.accepted)
					report(r, x)
					if base != nil {
						br := map[string]*loadRow{"half": baseHalf, "unique": baseUnique}[r.mix]
						report(br, base.run(t, k, r.mix, stored))
					}
				}
				for _, r := range []*loadRow{emptyHalf, emptyUnique} {
					esub := filepath.Join(dir, fmt.Sprintf("empty-beside-%d-%s-%d", n, r.mix, i))
					os.MkdirAll(esub, 0o755)
					e := loadServe(t, esub, filepath.Join(esub, "hookdedup.db"), "FULL")
					if i == 0 && r.mix == "half" {
						loadWrk(t, k, e.url, "unique", 2*time.Second) // warm-up
					}
					report(r, e.run(t, k, r.mix, 0))
					e.stop()
					os.RemoveAll(esub)
				}
				if k.storedClaims {
					inProcess(claimsURL, "half", claimsHalf)
					inProcess(claimsURL, "unique", claimsUnique)
				}
			}
			if base != nil {
				base.stop()
			}
			close(stopSampling)
			<-sampled
			if last {
				r, h, a := rss(s.cmd.Process.Pid)
				peakRSS, hwm, peakAnon = max(peakRSS, r), max(hwm, h), max(peakAnon, a)
				fmt.Printf("  serve's resident memory under load at %s keys: VmRSS peak %.0f MiB, VmHWM %.0f MiB, its own (RssAnon) peak %.0f MiB\n",
					loadCount(n), peakRSS, hwm, peakAnon)
			}
			if console {
				consoleAt = loadCount(n)
				consoleTimes = loadConsole(t, s, token, round+1, fillKeys)
				for _, tm := range consoleTimes {
					fmt.Printf("  %-34s first %7.1f ms  median %7.1f ms  slowest %7.1f ms\n", tm.what,
						float64(tm.first.Microseconds())/1000, float64(tm.median.Microseconds())/1000, float64(tm.max.Microseconds())/1000)
				}
			}
			s.stop()
		}
		if fi, err := os.Stat(path); err == nil {
			fmt.Printf("  database file: %.1f GiB\n", float64(fi.Size())/(1<<30))
		}
		if k.dir == "" {
			os.RemoveAll(sub)
		}
	}

	// The summary.
	var b strings.Builder
	bareRPS := bareRow.rps()
	fmt.Fprintf(&b, "\n| scenario | mix | requests/s | × bare | p50 ms | p99 ms | server CPU µs/request | CPU × claims-only |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		if len(r.runs) == 0 {
			continue
		}
		note := ""
		if r.note != "" {
			note = " (" + r.note + ")"
		}
		vsClaims := "-"
		if r.claims != nil && len(r.claims.runs) > 0 {
			vsClaims = fmt.Sprintf("%.2f", r.cpuRatio(r.claims))
		}
		fmt.Fprintf(&b, "| %s%s | %s | %.0f | %.2f | %.2f | %.2f | %.0f | %s |\n", r.scenario, note, r.mix, r.rps(), r.rps()/bareRPS, r.p50(), r.p99(),
			r.cpu(), vsClaims)
	}
	fmt.Fprintf(&b, "\nmedians of %d runs of %s each; wrk -t%d -c%d with testdata/sign.lua (every request signed); %d cores; load average now %.2f\n",
		k.runs, k.duration, k.threads, k.conns, runtime.NumCPU(), loadAverage())
	// refRatio compares r with the reference holding n keys, as measured in this run.
	refRatio := func(r *loadRow, n int) string {
		held := "empty"
		if n > 0 {
			held = "holding " + loadCount(n) + " keys"
		}
		if ref := refRows[n]; ref != nil && len(ref.runs) > 0 {
			return fmt.Sprintf("%.1f× the reference %s (%.0f req/s)", r.rps()/ref.rps(), held, ref.rps())
		}
		return "the reference " + held + ": not measured"
	}
	full := map[string]*loadRow{"half": emptyRows["FULLhalf"], "unique": emptyRows["FULLunique"]}
	if full["half"] != nil {
		fmt.Fprintf(&b, "\nsummary:\n")
		// BENCH_EMPTY=0 measured none of the empty rows at the top: nothing to say of them.
		emptyMeasured := len(full["half"].runs) > 0
		if emptyMeasured {
			fmt.Fprintf(&b, "- ceiling: the intake handler with nothing stored reaches %.2f× bare (server CPU %.0f µs a request); storage has to fit in what is left\n",
				noStoreRow.rps()/bareRPS, noStoreRow.med(func(x loadResult) float64 { return x.CPUPerReq }))
		}
		for _, mix := range []string{"half", "unique"} {
			r := full[mix]
			if !emptyMeasured {
				break
			}
			cpu := func(r *loadRow) float64 { return r.med(func(x loadResult) float64 { return x.CPUPerReq }) }
			fmt.Fprintf(&b, "- %s, empty: %.2f× bare, p99 %.2f ms, %s; server CPU %.0f µs a request against the bare handler's %.0f (%.2f×)\n",
				mix, r.rps()/bareRPS, r.p99(), refRatio(r, 0), cpu(r), cpu(bareRow), cpu(bareRow)/cpu(r))
		}
		// The targets: flat (≥ 0.85× the empty database's requests/s and ≤ 1.5× its p99
		// at every stored size), close to a claim (CPU per request ≤ 1.25× the
		// claims-only store's), and a p99 of 10 ms at most on an empty database.
		mark := func(ok bool) string {
			if ok {
				return "met"
			}
			return "MISSED"
		}
		for _, mix := range []string{"half", "unique"} {
			r := full[mix]
			if !emptyMeasured {
				break
			}
			fmt.Fprintf(&b, "- p99, %s, empty, every request signed, %d connections: %.2f ms (target ≤ 10 ms: %s)",
				mix, k.conns, r.p99(), mark(r.p99() <= 10))
			if p := pacedRows[mix]; p != nil && len(p.runs) > 0 {
				fmt.Fprintf(&b, "; each sender %s apart, %.0f req/s: %.2f ms (%s)", k.pace, p.rps(), p.p99(), mark(p.p99() <= 10))
			}
			b.WriteString("\n")
		}
		for _, sr := range append([]*loadRow{full["half"], full["unique"]}, sizeRows...) {
			if sr.claims == nil || len(sr.claims.runs) == 0 {
				continue
			}
			ratio := sr.cpuRatio(sr.claims)
			fmt.Fprintf(&b, "- CPU, %s, %s: %.0f µs a request against the claims-only store's %.0f: %.2f×, the median of the runs' ratios (target ≤ 1.25×: %s)\n",
				sr.scenario, sr.mix, sr.cpu(), sr.claims.cpu(), ratio, mark(ratio <= 1.25))
		}
		for _, mix := range []string{"half", "unique"} {
			if f := forensicsRows[mix]; f != nil && len(f.runs) > 0 {
				forensicsSummary(&b, "SQLite", f, full[mix])
			}
			if f, off := baselineForensicsRows[mix], baselineRows[mix]; f != nil && len(f.runs) > 0 && len(off.runs) > 0 {
				forensicsSummary(&b, "BENCH_BASELINE, SQLite", f, off)
			}
		}
		for _, sr := range sizeRows {
			e := sr.empty
			tput, p99 := sr.rps()/e.rps(), sr.p99()/e.p99()
			fmt.Fprintf(&b, "- %s, %s: %.2f× the empty database's requests/s, %.2f× its p99, %+.0f µs of CPU a request, the empty database run between its runs (targets ≥ 0.85× and ≤ 1.5×: %s)",
				sr.scenario, sr.mix, tput, p99, sr.cpu()-e.cpu(), mark(tput >= 0.85 && p99 <= 1.5))
			if strings.HasPrefix(sr.scenario, "1 M ") {
				fmt.Fprintf(&b, "; %s, %s", refRatio(sr, 1_000_000), refRatio(sr, 100_000))
			}
			b.WriteString("\n")
		}
		for _, mix := range []string{"half", "unique"} {
			if r := baselineRows[mix]; r != nil && len(r.runs) > 0 {
				e := full[mix]
				fmt.Fprintf(&b, "- against BENCH_BASELINE, empty, %s: %.2f× its requests/s, %.2f× its p99, %.2f× its CPU a request\n",
					mix, e.rps()/r.rps(), e.p99()/r.p99(), e.cpuRatio(r))
			}
		}
		for _, pair := range baselineSized {
			r, e := pair[0], pair[1]
			fmt.Fprintf(&b, "- against BENCH_BASELINE, %s, %s: %.2f× its requests/s, %.2f× its p99, %.2f× its CPU a request\n",
				e.scenario, e.mix, e.rps()/r.rps(), e.p99()/r.p99(), e.cpuRatio(r))
		}
		for _, mix := range []string{"half", "unique"} {
			if r, e := baselineForensicsRows[mix], forensicsRows[mix]; r != nil && e != nil && len(r.runs) > 0 && len(e.runs) > 0 {
				fmt.Fprintf(&b, "- forensics on, against BENCH_BASELINE's, %s: %.2f× its requests/s, %.2f× its p99, %.2f× its CPU a request\n",
					mix, e.rps()/r.rps(), e.p99()/r.p99(), e.cpuRatio(r))
			}
		}
		if sweepRow != nil && len(sweepRow.runs) > 0 {
			base := full["half"]
			for _, sr := range sizeRows {
				if sr.mix == "half" && sr.runs[0].StoredAtRun <= int64(k.sweepKeys) {
					base = sr // the same number of keys, without a sweep
					break
				}
			}
			fmt.Fprintf(&b, "- p99 during the sweep: %.2f ms, %.2f× its p99 without one (%s, half)\n",
				sweepRow.p99(), sweepRow.p99()/base.p99(), base.scenario)
		}
		postgresSummary(&b, pgRows, full)
		if peakRSS > 0 {
			fmt.Fprintf(&b, "- resident memory under load at %s keys: VmRSS peak %.0f MiB, VmHWM %.0f MiB; the process's own (RssAnon) peak %.0f MiB, the rest mostly the memory-mapped database file\n",
				loadCount(k.keys[len(k.keys)-1]), peakRSS, hwm, peakAnon)
		}
	}
	if len(consoleTimes) > 0 {
		var slowMedian, slowOne loadConsoleTiming
		for _, tm := range consoleTimes {
			if tm.median > slowMedian.median {
				slowMedian = tm
			}
			if max(tm.first, tm.max) > max(slowOne.first, slowOne.max) {
				slowOne = tm
			}
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Fprintf(&b, "- console and JSON API at %s keys: slowest median %.1f ms (%s), slowest single answer %.1f ms (%s)\n",
			consoleAt, ms(slowMedian.median), slowMedian.what, ms(max(slowOne.first, slowOne.max)), slowOne.what)
		loadConsoleReport(&b, consoleAt, consoleTimes)
	}
	fmt.Print(b.String())
	if k.out != "" {
		if err := os.WriteFile(k.out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func loadCount(n int) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + " M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + " k"
	}
	return strconv.Itoa(n)
}

// TestLoadFill fills BENCH_DIR's stored/ with the first of BENCH_KEYS's sizes as TestLoad
// would (the database and the claims-only store's) and measures nothing: a later
// TestLoad with BENCH_FILLED=1 starts from it. Filling 5 M keys takes minutes of both
// cores, which need not overlap anybody's measurements; a copy of stored/ made
// beforehand also lets several runs start from the same file.
func TestLoadFill(t *testing.T) {
	k := loadReadKnobs(t)
	if k.dir == "" || len(k.keys) == 0 {
		t.Fatal("TestLoadFill needs BENCH_DIR and BENCH_KEYS")
	}
	sub := filepath.Join(k.dir, "stored")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "hookdedup.db")
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("%s exists: TestLoadFill fills an empty directory", path)
	}
	n := k.keys[0]
	loadFill(t, path, 1, n, false)
	if k.storedClaims {
		claims := openClaimsOnly(t, filepath.Join(sub, "claims.db"))
		claims.fill(t, "ota", 0, n, loadFillKey(1, n))
		claims.close()
	}
}

// TestLoadPerf checks that BENCH_PERF keeps the profile of every run, also of the runs
// that one server serves at the same size and mix.
func TestLoadPerf(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf is not installed")
	}
	k := loadKnobs{perf: t.TempDir()}
	pid := strconv.Itoa(os.Getpid())
	for range 3 {
		stop := loadPerf(t, k, pid, "0-half-"+pid)
		time.Sleep(500 * time.Millisecond) // perf is attached and recording
		stop()
	}
	files, err := filepath.Glob(filepath.Join(k.perf, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("3 runs recorded into %d files: %q", len(files), files)
	}
}
