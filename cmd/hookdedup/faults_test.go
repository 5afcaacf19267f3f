package main

// Faults: the disk full, the database file made read-only, the database locked
// by another process, the downstream hanging, a slow-loris sender. Intake must answer
// 503 (never 200 for something it did not store), recover by itself when the fault
// clears, and never panic.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	_ "github.com/mattn/go-sqlite3" // the other process's connection in the lock test

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// faultSend is one delivery and its answer.
type faultSend struct {
	id         string
	code       int
	answer     map[string]string
	retryAfter string
}

// faultRig is a serve on a database at dbPath, and a sender that remembers every answer.
type faultRig struct {
	t      *testing.T
	dir    string
	dbPath string
	s      *server
	v      signature.Verifier
	client *http.Client
	n      int
	mu     sync.Mutex
	sends  []faultSend
}

// newFaultRig starts serve with one source, "ota"; top is added to the top-level
// settings and src to the source's.
func newFaultRig(t *testing.T, dbPath, top, src string) *faultRig {
	t.Helper()
	dir := t.TempDir()
	if dbPath == "" {
		dbPath = filepath.Join(dir, "hookdedup.db")
	}
	cfg := fmt.Sprintf("database = %q\n%s\n[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\nsecret = %q\n%s\n",
		dbPath, top, testSecret, src)
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &faultRig{t: t, dir: dir, dbPath: dbPath, v: standardWebhooks(t, testSecret), client: &http.Client{Timeout: 2 * time.Minute}}
	r.s = startLogged(t, dir, "serve.log", nil)
	return r
}

// deliver sends the event id (padded with pad bytes) and records the answer.
func (r *faultRig) deliver(id string, pad int) faultSend {
	r.t.Helper()
	s, err := r.try(id, pad)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// try is deliver for any goroutine: it reports what went wrong instead of failing.
func (r *faultRig) try(id string, pad int) (faultSend, error) {
	body := fmt.Appendf(nil, `{"booking_id":%q,"status":"cancelled","pad":%q}`, id, strings.Repeat("x", pad))
	req, err := signedRequest(r.v, r.s.url, "ota", id, body)
	if err != nil {
		return faultSend{}, fmt.Errorf("delivery %s: %w", id, err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return faultSend{}, fmt.Errorf("delivery %s: %w", id, err)
	}
	defer resp.Body.Close()
	s := faultSend{id: id, code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &s.answer); err != nil {
		return faultSend{}, fmt.Errorf("delivery %s: %d %q is not JSON", id, resp.StatusCode, raw)
	}
	r.mu.Lock()
	r.sends = append(r.sends, s)
	r.mu.Unlock()
	return s, nil
}

func (r *faultRig) next(pad int) faultSend {
	r.n++
	return r.deliver(fmt.Sprintf("evt_%04d", r.n), pad)
}

func (r *faultRig) ready() int {
	resp, err := r.client.Get(r.s.url + "/readyz")
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// storageFault runs one storage fault through its course: healthy traffic, the fault,
// traffic until intake refuses, a burst of burst concurrent deliveries (so that a whole
// group-committed batch fails), the fault cleared, recovery without a restart, and a
// reckoning of every answer against the database.
func (r *faultRig) storageFault(inject, clear func(), pad, burst int) {
	t := r.t
	for range 5 {
		if s := r.next(pad); s.code != 200 || s.answer["status"] != "accepted" {
			t.Fatalf("healthy: %+v", s)
		}
	}
	inject()
	refused := 0
	var refusedIDs []string
	for i := 0; i < 300 && refused < 2; i++ {
		s := r.next(pad)
		switch {
		case s.code == 503 && s.retryAfter != "" && s.answer["error"] != "" && s.answer["status"] == "":
			refused++
			refusedIDs = append(refusedIDs, s.id)
		case s.code == 200:
			refused = 0 // it found room (a WAL already that long): stored, as the reckoning checks
		default:
			t.Fatalf("during the fault: %+v, want 200 or 503 with Retry-After", s)
		}
	}
	if refused == 0 {
		t.Fatal("the fault never made intake refuse")
	}
	var wg sync.WaitGroup
	burst503 := 0
	results := make([]faultSend, burst)
	errs := make([]error, burst)
	for i := range burst {
		r.n++
		id := fmt.Sprintf("evt_%04d", r.n)
		wg.Go(func() { results[i], errs[i] = r.try(id, pad) })
	}
	wg.Wait()
	for i, s := range results {
		switch {
		case errs[i] != nil:
			t.Fatal(errs[i])
		case s.code == 503:
			burst503++
			refusedIDs = append(refusedIDs, s.id)
		case s.code != 200:
			t.Fatalf("a burst during the fault: %+v, want 200 or 503", s)
		}
	}
	if code := r.ready(); code != 503 {
		t.Errorf("/readyz during the fault = %d, want 503", code)
	}
	clear()

	// Recovery, by itself: no restart.
	storagetest.Eventually(t, 90*time.Second, func() error {
		s := r.next(pad)
		switch s.code {
		case 200:
			return nil
		case 503:
			refusedIDs = append(refusedIDs, s.id)
			return fmt.Errorf("after the fault cleared: %+v", s)
		}
		t.Fatalf("after the fault cleared: %+v, want 200 or 503", s)
		return nil
	})
	if code := r.ready(); code != 200 {
		t.Errorf("/readyz after the fault = %d, want 200", code)
	}
	// What was refused was not stored: delivered again, it is accepted, not a duplicate.
	for _, id := range refusedIDs {
		if s := r.deliver(id, pad); s.code != 200 || s.answer["status"] != "accepted" {
			t.Errorf("%s, refused during the fault, delivered again: %+v, want accepted", id, s)
		}
	}
	r.s.stop(t)
	r.reckon()
	t.Logf("%d deliveries, %d refused with 503 during the fault (%d in a burst of %d), recovered without a restart",
		len(r.sends), len(refusedIDs), burst503, burst)
}

// reckon checks the database against every answer: each 200 is stored as answered, and
// nothing else is.
func (r *faultRig) reckon() {
	t := r.t
	checkLogs(t, r.dir)
	db, err := sqlite.Open(r.dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, s := range r.sends {
		if s.code != 200 {
			continue
		}
		ok++
		id, _ := strconv.ParseInt(s.answer["delivery"], 10, 64)
		d, err := db.Delivery(ctx, id)
		if err != nil || d.Key != s.id || string(d.Outcome) != s.answer["status"] {
			t.Errorf("answered %+v, stored %+v %v", s, d, err)
		}
	}
	c, err := storagetest.CountDeliveries(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	if int(c.Accepted+c.Duplicate) != ok || c.Rejected != 0 {
		t.Errorf("stored %+v, but %d deliveries were answered 200", c, ok)
	}
}

// TestFault_DiskFull puts the database on a 4 MiB tmpfs and fills it.
func TestFault_DiskFull(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	mnt := filepath.Join(t.TempDir(), "small")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s); TestFault_FileSizeLimit covers a full disk", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	r := newFaultRig(t, filepath.Join(mnt, "hookdedup.db"), "", "")
	ballast := filepath.Join(mnt, "ballast")
	r.storageFault(func() {
		f, err := os.Create(ballast)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 64<<10)
		for i := 0; i < 1000; i++ { // 4 MiB fills long before 64 MiB
			if _, err := f.Write(buf); err != nil {
				break // ENOSPC: full
			}
		}
	}, func() {
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
	}, 16<<10, 8)
}

// setFileSizeLimit sets the soft RLIMIT_FSIZE of the running process pid (prlimit(2));
// 0 lifts it. A Go program ignores SIGXFSZ unless it asks for it, so writes past the
// limit fail with EFBIG instead of killing the process. The hard limit stays as it is,
// so lifting needs no privilege.
func setFileSizeLimit(pid int, limit uint64) error {
	var old syscall.Rlimit
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		0, uintptr(unsafe.Pointer(&old)), 0, 0); errno != 0 {
		return errno
	}
	lim := syscall.Rlimit{Cur: limit, Max: old.Max}
	if limit == 0 {
		lim.Cur = old.Max
	}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// TestFault_FileSizeLimit makes the disk "full" for the serve process alone, through
// RLIMIT_FSIZE: the other way to a full disk, where mounting is not allowed.
func TestFault_FileSizeLimit(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	r := newFaultRig(t, "", "", "")
	pid := r.s.cmd.Process.Pid
	r.storageFault(func() {
		var limit int64
		for _, suffix := range []string{"", "-wal"} {
			if st, err := os.Stat(r.dbPath + suffix); err == nil {
				limit = max(limit, st.Size())
			}
		}
		if err := setFileSizeLimit(pid, uint64(limit)); err != nil {
			t.Skipf("cannot set RLIMIT_FSIZE of the serve process: %v", err)
		}
	}, func() {
		if err := setFileSizeLimit(pid, 0); err != nil {
			t.Fatal(err)
		}
	}, 16<<10, 8)
}

// TestFault_ReadOnly makes the database file and its WAL immutable (chattr +i), which
// stops even root, and also already-open descriptors, from writing them.
func TestFault_ReadOnly(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	r := newFaultRig(t, "", "", "")
	files := []string{r.dbPath, r.dbPath + "-wal"}
	t.Cleanup(func() { exec.Command("chattr", append([]string{"-i"}, files...)...).Run() })
	r.storageFault(func() {
		if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
			t.Skipf("chattr +i is not available here (%v: %s)", err, out)
		}
	}, func() {
		if out, err := exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput(); err != nil {
			t.Fatalf("chattr -i: %v: %s", err, out)
		}
	}, 0, 8)
}

// TestFault_Locked holds the database's write lock from another process (this test's),
// longer than serve's busy timeout (5s).
func TestFault_Locked(t *testing.T) {
	if testing.Short() {
		t.Skip("long: each refused delivery waits serve's busy timeout (5s); TestHandler_DatabaseLocked covers the answer")
	}
	t.Parallel()
	r := newFaultRig(t, "", "", "")
	other, err := sql.Open("sqlite3", "file:"+r.dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var conn *sql.Conn
	r.storageFault(func() {
		if conn, err = other.Conn(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}, 0, 0) // a burst under a lock waits busy_timeout per delivery: TestHostile_LockedBurst
}

// hangingSink is a downstream that, while hanging, holds each hand-off without an answer
// until the sender gives up (and then has not acted on it).
type hangingSink struct {
	mu      sync.Mutex
	hanging bool
	held    int
	got     map[string]int
}

func (h *hangingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	hanging := h.hanging
	if hanging {
		h.held++
	}
	h.mu.Unlock()
	if hanging {
		<-r.Context().Done()
		return
	}
	h.mu.Lock()
	h.got[r.Header.Get("Idempotency-Key")]++
	h.mu.Unlock()
}

// TestFault_DownstreamHangs: intake keeps answering 200 (it never waits for the
// downstream), attempts time out and are retried, the keys show as stuck, and when the
// downstream answers again every event reaches it once.
func TestFault_DownstreamHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("long: hand-offs are held until attempt_timeout (3s); TestDispatch_TimeoutThenRecovery covers a timeout")
	}
	t.Parallel()
	sink := &hangingSink{hanging: true, got: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sink}
	go srv.Serve(ln)
	defer srv.Close()
	r := newFaultRig(t, "", `stuck_after = "1s"`, fmt.Sprintf(
		"forward_url = \"http://%s/events\"\nmax_attempts = 1000\nattempt_timeout = \"3s\"\nmax_backoff = \"1s\"", ln.Addr()))

	const events = 20
	for range events {
		if s := r.next(0); s.code != 200 || s.answer["status"] != "accepted" {
			t.Fatalf("while the downstream hangs: %+v", s)
		}
	}
	// Attempts time out; the keys become stuck with the reason.
	storagetest.Eventually(t, 60*time.Second, func() error {
		out, code := cli(t, r.dir, nil, "", "keys", "--stuck")
		sink.mu.Lock()
		held := sink.held
		sink.mu.Unlock()
		if code != 0 || !strings.Contains(out, "no answer within 3s") || held < events {
			return fmt.Errorf("no stuck keys timed out yet (held %d hand-offs):\n%s", held, out)
		}
		return nil
	})
	if code := r.ready(); code != 200 {
		t.Errorf("/readyz with a hanging downstream = %d, want 200 (the database is fine)", code)
	}
	sink.mu.Lock()
	sink.hanging = false
	sink.mu.Unlock()

	storagetest.Eventually(t, 90*time.Second, func() error {
		out, code := cli(t, r.dir, nil, "", "keys", "--state", "processing")
		sink.mu.Lock()
		n := len(sink.got)
		sink.mu.Unlock()
		if code != 0 || n != events || strings.Contains(out, "evt_") {
			return fmt.Errorf("the downstream has %d of %d events since it recovered:\n%s", n, events, out)
		}
		return nil
	})
	r.s.stop(t)
	sink.mu.Lock()
	for k, n := range sink.got {
		if n != 1 {
			t.Errorf("%s reached the downstream %d times", k, n)
		}
	}
	t.Logf("%d hand-offs held without an answer, then each of %d events handed off once", sink.held, events)
	sink.mu.Unlock()
	r.reckon()
}

// TestFault_SlowLoris: a sender that trickles its headers or its body cannot hold a
// connection for long, nor stop others from being served meanwhile. The server's read
// timeouts are cut to seconds so that the test need not wait for the defaults.
func TestFault_SlowLoris(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, "", "read_header_timeout = \"2s\"\nread_timeout = \"3s\"", "")
	addr := strings.TrimPrefix(r.s.url, "http://")

	// Headers never finished; body promised and never sent.
	slowHeaders, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slowHeaders.Close()
	fmt.Fprintf(slowHeaders, "POST /webhooks/ota HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", addr)
	slowBody, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slowBody.Close()
	body := `{"booking_id":"loris","status":"cancelled"}`
	h := http.Header{"Webhook-Id": {"evt_loris"}}
	r.v.Sign(h, nil, []byte(body), time.Now())
	fmt.Fprintf(slowBody, "POST /webhooks/ota HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, len(body))
	h.Write(slowBody)
	fmt.Fprintf(slowBody, "\r\n%s", body[:10])

	// Others are served meanwhile.
	for range 3 {
		if s := r.next(0); s.code != 200 {
			t.Fatalf("while two connections trickle: %+v", s)
		}
	}
	// The server ends both (read_header_timeout, read_timeout); the bound here is
	// generous, the point is that it ends.
	for name, c := range map[string]net.Conn{"slow headers": slowHeaders, "slow body": slowBody} {
		c.SetReadDeadline(time.Now().Add(2 * time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil:
			defer resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Errorf("%s: answered 200", name)
			}
			msg, _ := io.ReadAll(resp.Body)
			t.Logf("%s: the server answered %s %s", name, resp.Status, msg)
		case strings.Contains(err.Error(), "timeout"):
			t.Errorf("%s: the connection was still open after 2 minutes", name)
		default:
			t.Logf("%s: the server closed the connection (%v)", name, err)
		}
	}
	if s := r.next(0); s.code != 200 {
		t.Fatalf("after the slow senders: %+v", s)
	}
	r.s.stop(t)
	checkLogs(t, r.dir)
	// The trickled delivery was not accepted.
	db, err := sqlite.Open(r.dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c, err := db.Claim(context.Background(), "ota", "evt_loris"); err == nil {
		t.Errorf("the trickled delivery was claimed: %+v", c)
	}
}

// TestFault_RestoreDiskFull: a restore onto a full disk says the disk is full and to
// free space, not to move the database aside (which would give up the ids it issued),
// and changes nothing; once there is room, it restores.
func TestFault_RestoreDiskFull(t *testing.T) {
	t.Parallel() // its own mount and files
	mnt := filepath.Join(t.TempDir(), "small")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	path := filepath.Join(mnt, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "k1", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)
	backup := filepath.Join(t.TempDir(), "b.db")
	if out, err := cli("backup", backup); err != nil {
		t.Fatalf("backup: %v %s", err, out)
	}
	ballast := filepath.Join(mnt, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	// Full to the last byte.
	for _, size := range []int{64 << 10, 4 << 10, 1} {
		buf := make([]byte, size)
		for i := 0; i < 70000; i++ { // 4 MiB fills long before
			if _, err := f.Write(buf); err != nil {
				break // ENOSPC: full
			}
		}
	}
	f.Close()
	_, err = cli("restore", backup)
	if err == nil || !strings.Contains(err.Error(), "(the disk is full: free space on it and run restore again)") ||
		strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("restore onto a full disk: %v; want it to say the disk is full, and not to move the database aside", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("restore", backup); err != nil {
		t.Fatalf("restore once there is room: %v %s", err, out)
	}
}
