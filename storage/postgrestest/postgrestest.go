// Package postgrestest runs the tests of a package against a real PostgreSQL server: a
// throwaway cluster of its own, started once per test process, and a fresh database for
// each test, cloned from a template.
//
// A package uses it from its TestMain:
//
//	func TestMain(m *testing.M) { postgrestest.Main(m, nil) }
//
//	func TestSomething(t *testing.T) {
//		url := postgrestest.NewDatabase(t) // postgres://…@127.0.0.1:port/db
//		…
//	}
//
// The cluster comes from the PostgreSQL server binaries installed on the machine
// (Debian's postgresql package, /usr/lib/postgresql/<major>/bin, the highest major
// installed; otherwise initdb on PATH); nothing is downloaded. It is initialised in a
// temp dir, listens on a free port of 127.0.0.1 only, keeps its unix socket in that temp
// dir, and keeps PostgreSQL's durability settings (fsync, synchronous_commit) at their
// defaults, so tests see a server that behaves like a production one. It starts on the
// first NewDatabase, so a run that selects no PostgreSQL test does not pay for it.
//
// PostgreSQL refuses to run as root. When the tests run as root (CI does), the server
// runs as the system user "postgres" that Debian's package creates; as any other user it
// runs as that user.
//
// When the server binaries are missing, or the tests run as root on a machine without a
// postgres user, NewDatabase skips the test saying so, except under CI (CI set in the
// environment), where it fails it: there `make deps` has installed the package.
//
// The cluster is stopped and its temp dir removed when the tests end, and also when the
// test process dies without ending them (a panic, a timeout, a kill): a small watchdog
// process waits for the test process to go away and then does it.
package postgrestest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// superuser is the cluster's superuser, the role every test connects as.
	superuser = "postgres"
	// templateDB is the database that each test's database is cloned from.
	templateDB = "hookdedup_template"
	// waitSeconds bounds each of pg_ctl's waits (start, stop).
	waitSeconds = 60
	// adminTimeout bounds each statement of the harness's own (create, drop, setup).
	adminTimeout = 60 * time.Second
	// portAttempts bounds how often a start is retried when another process took the
	// free port between its choice and the server's bind.
	portAttempts = 5
)

var (
	mu       sync.Mutex
	mainRan  bool
	setup    func(ctx context.Context, url string) error
	started  bool
	startErr error
	cl       *cluster
	created  int
	createIn time.Duration // spent creating test databases
	dropIn   time.Duration // and dropping them
)

// Main runs the package's tests and then stops the cluster, if one was started, and
// removes it; call it from TestMain. It does not return: it exits with the tests' code.
//
// setupTemplate, if not nil, runs once, right after the cluster starts, against the
// template database that every test's database is cloned from (url connects to it): a
// schema created there is in every test's database at no cost per test. It must close
// every connection it opened before it returns: PostgreSQL clones no database that has
// a session.
//
// With -v, Main prints how long the cluster took to start and what a test's database
// cost.
func Main(m *testing.M, setupTemplate func(ctx context.Context, url string) error) {
	os.Exit(Run(m, setupTemplate))
}

// Run is Main for a TestMain that has more to do after the tests: it returns the code
// to exit with instead of exiting.
func Run(m *testing.M, setupTemplate func(ctx context.Context, url string) error) int {
	mu.Lock()
	mainRan = true
	setup = setupTemplate
	mu.Unlock()

	code := m.Run()

	mu.Lock()
	c := cl
	n, createSum, dropSum := created, createIn, dropIn
	mu.Unlock()
	if c != nil {
		if testing.Verbose() {
			fmt.Printf("postgrestest: PostgreSQL %s cluster started in %v (initdb %v, pg_ctl start %v, template %v); %d test databases, each created in %v and dropped in %v on average\n",
				c.version, (c.initdb + c.start + c.template).Round(time.Millisecond),
				c.initdb.Round(time.Millisecond), c.start.Round(time.Millisecond), c.template.Round(time.Millisecond),
				n, average(createSum, n), average(dropSum, n))
		}
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "postgrestest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// average is d shared over n.
func average(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(100 * time.Microsecond)
}

// Connect is a connection of tb's own to the database at url (from NewDatabase),
// closed when tb ends.
func Connect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.WithoutCancel(tb.Context())) })
	return conn
}

// NewDatabase creates a database for tb, a clone of the template (empty, or as Main's
// setupTemplate left it), and returns a URL that connects to it as the superuser over TCP
// (postgres://postgres:…@127.0.0.1:port/name?sslmode=disable). The database is dropped
// when tb ends, with any connection still open to it. The first call starts the cluster.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	c, err := ensureCluster()
	if err != nil {
		var u unavailableError
		if errors.As(err, &u) && os.Getenv("CI") == "" {
			tb.Skipf("postgrestest: %v", err)
		}
		tb.Fatalf("postgrestest: %v", err)
	}

	mu.Lock()
	created++
	name := databaseName(created, tb.Name())
	mu.Unlock()

	began := time.Now()
	if err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+
			" TEMPLATE "+pgx.Identifier{templateDB}.Sanitize())
		return err
	}); err != nil {
		tb.Fatalf("postgrestest: create database %s: %v", name, err)
	}
	took := time.Since(began)
	mu.Lock()
	createIn += took
	mu.Unlock()
	// The drop waits for the test's last connections to end (PostgreSQL polls for them
	// every 100 ms), so it runs in the background rather than at the end of each test.
	tb.Cleanup(func() { c.drop(name) })
	return c.url(name)
}

// databaseName names the n-th test database after its test, within PostgreSQL's 63
// bytes, so that a leftover one in the server's log says whose it was.
func databaseName(n int, test string) string {
	name := fmt.Sprintf("t%d_%s", n, strings.ToLower(unsafeChars.ReplaceAllString(test, "_")))
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// unavailableError says that this machine cannot run a cluster at all: no server
// binaries, or root without a user to run them as. Outside CI it skips a test.
type unavailableError struct{ msg string }

func (e unavailableError) Error() string { return e.msg }

// ensureCluster starts the cluster on the first call and returns it; a start that
// failed is not tried again: every later test gets the same error.
func ensureCluster() (*cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	if !mainRan {
		return nil, errors.New("call postgrestest.Main from the package's TestMain: it stops the cluster when the tests end")
	}
	if !started {
		started = true
		cl, startErr = startCluster(setup)
	}
	return cl, startErr
}

// cluster is one running PostgreSQL server in a temp dir of its own.
type cluster struct {
	bindir   string
	dir      string // the temp dir: data/, the log, the unix socket
	data     string
	port     int
	password string
	version  string
	// cred runs the server's programs as another user (postgres, when the tests run as
	// root); nil runs them as the current user.
	cred *syscall.Credential
	// watchdogIn is the write end of the watchdog's stdin: the watchdog cleans up when
	// it closes, which the kernel does when this process exits, however it exits.
	watchdogIn *os.File
	watchdog   *exec.Cmd

	adminMu   sync.Mutex
	adminConn *pgx.Conn

	// drops takes the names of the databases whose tests ended; dropper drops them,
	// on a connection of its own, and closes dropped when drops is closed and drained.
	drops   chan string
	dropped chan error
	// dropMu guards closed, which says drops was closed (the cluster stopped): a
	// database whose test ends after that went with the cluster.
	dropMu sync.Mutex
	closed bool

	initdb, start, template time.Duration
}

// binDir returns the directory of the PostgreSQL server binaries: Debian's
// /usr/lib/postgresql/<major>/bin of the highest major installed, or else the directory
// of initdb on PATH (other distributions, Homebrew).
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type candidate struct {
		major int
		dir   string
	}
	var found []candidate
	for _, dir := range dirs {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		if err != nil || !executable(filepath.Join(dir, "initdb")) || !executable(filepath.Join(dir, "pg_ctl")) {
			continue
		}
		found = append(found, candidate{major, dir})
	}
	if len(found) > 0 {
		best := slices.MaxFunc(found, func(a, b candidate) int { return a.major - b.major })
		return best.dir, nil
	}
	if path, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(path)
		if executable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", unavailableError{"no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or on PATH: install Debian's postgresql package (make deps does)"}
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverUser says whom the server runs as: nil for the current user, or, as root, the
// postgres user, since initdb, pg_ctl and postgres all refuse to run as root.
func serverUser() (*syscall.Credential, *user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, unavailableError{fmt.Sprintf("running as root, and PostgreSQL refuses to: no user %q to run it as (%v); Debian's postgresql package creates it", "postgres", err)}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, fmt.Errorf("user postgres: %w", err)
	}
	// Groups left empty: the server gets no supplementary group of root's.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, u, nil
}

// startCluster initialises a cluster in a new temp dir, starts it, and prepares the
// template database.
func startCluster(setupTemplate func(ctx context.Context, url string) error) (_ *cluster, err error) {
	bindir, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, u, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hookdedup-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	// A unix socket's path is limited to 107 bytes.
	if len(filepath.Join(dir, ".s.PGSQL.65535")) > 107 {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("temp dir %s is too long a path for PostgreSQL's unix socket: set TMPDIR to a shorter one", dir)
	}
	c := &cluster{bindir: bindir, dir: dir, data: filepath.Join(dir, "data"), cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("temp dir for user %s: %w", u.Username, err)
		}
	}
	// From here on the watchdog removes the temp dir whatever happens to this process.
	if err := c.startWatchdog(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := c.stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()

	c.password = rand.Text()
	pwfile := filepath.Join(dir, "pwfile")
	if err := c.writeFile(pwfile, c.password+"\n"); err != nil {
		return nil, err
	}
	began := time.Now()
	// TCP asks for the password, as a production server would; the unix socket in the
	// temp dir (pg_ctl's readiness check) trusts. --no-sync skips initdb's one flush of
	// the new data dir (half its time), which only matters if the machine crashes before
	// the throwaway cluster is removed; the server's own fsync stays on.
	if out, err := c.run(filepath.Join(bindir, "initdb"), "-D", c.data, "-U", superuser, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-locale", "--encoding=UTF8",
		"--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	c.initdb = time.Since(began)
	os.Remove(pwfile)
	version, err := os.ReadFile(filepath.Join(c.data, "PG_VERSION"))
	if err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	c.version = strings.TrimSpace(string(version))

	began = time.Now()
	if err := c.startServer(); err != nil {
		return nil, err
	}
	c.start = time.Since(began)

	began = time.Now()
	if err := c.prepareTemplate(setupTemplate); err != nil {
		return nil, err
	}
	c.template = time.Since(began)
	c.drops, c.dropped = make(chan string, 256), make(chan error, 1)
	go c.dropper()
	return c, nil
}

// drop hands database name to the dropper, unless the cluster has stopped.
func (c *cluster) drop(name string) {
	c.dropMu.Lock()
	defer c.dropMu.Unlock()
	if !c.closed {
		c.drops <- name
	}
}

// dropper drops the databases named on c.drops, until it is closed, then reports on
// c.dropped the drops that failed.
func (c *cluster) dropper() {
	var errs []error
	var conn *pgx.Conn
	for name := range c.drops {
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		var err error
		if conn == nil || conn.IsClosed() {
			conn, err = pgx.Connect(ctx, c.url("postgres"))
		}
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		}
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("drop database %s: %w", name, err))
		}
		mu.Lock()
		dropIn += time.Since(began)
		mu.Unlock()
	}
	if conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn.Close(ctx)
		cancel()
	}
	c.dropped <- errors.Join(errs...)
}

// startWatchdog starts the process that stops the cluster and removes its temp dir once
// this process has gone: it reads its stdin, a pipe whose only writer is this process,
// until the end, which comes when this process closes it or dies. It runs as the server's
// user, in a process group of its own, so that a Ctrl-C meant for the tests does not
// end it before it has cleaned up.
func (c *cluster) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	defer r.Close()
	script := `while read -r _; do :; done; "$0" stop -D "$1" -m immediate -w -t 60 >/dev/null 2>&1; rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(c.bindir, "pg_ctl"), c.data, c.dir)
	cmd.Stdin = r
	cmd.Dir = c.dir
	cmd.Env = c.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	c.watchdogIn, c.watchdog = w, cmd
	return nil
}

// startServer picks a free port of 127.0.0.1 and starts the server on it, again on
// another port if something else took that one in between.
func (c *cluster) startServer() error {
	conf := filepath.Join(c.data, "postgresql.conf")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		// Appended settings win over earlier ones, a retry's port over the last.
		settings := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n", port, c.dir)
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("postgresql.conf: %w", err)
		}
		_, err = f.WriteString(settings)
		if err := errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("postgresql.conf: %w", err)
		}
		logfile := filepath.Join(c.dir, "postgres.log")
		out, err := c.run(filepath.Join(c.bindir, "pg_ctl"), "start", "-w", "-t", strconv.Itoa(waitSeconds),
			"-D", c.data, "-l", logfile)
		if err == nil {
			c.port = port
			return nil
		}
		log, _ := os.ReadFile(logfile)
		if attempt < portAttempts && strings.Contains(string(log), "could not bind") {
			continue
		}
		return fmt.Errorf("pg_ctl start: %w\n%s\nserver log:\n%s", err, out, tail(log, 4000))
	}
}

// freePort returns a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// prepareTemplate creates the template database and runs setupTemplate against it.
func (c *cluster) prepareTemplate(setupTemplate func(ctx context.Context, url string) error) error {
	err := c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{templateDB}.Sanitize())
		return err
	})
	if err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	if setupTemplate == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := setupTemplate(ctx, c.url(templateDB)); err != nil {
		return fmt.Errorf("set up template database: %w", err)
	}
	return nil
}

// admin runs f on the harness's own connection to the postgres database, one call at a
// time: CREATE DATABASE copies the template, which must have no other session.
func (c *cluster) admin(f func(ctx context.Context, conn *pgx.Conn) error) error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if c.adminConn == nil || c.adminConn.IsClosed() {
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		if err != nil {
			return err
		}
		c.adminConn = conn
	}
	return f(ctx, c.adminConn)
}

// url returns the URL of database name over TCP, with the superuser's password.
func (c *cluster) url(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// stop stops the server, removes the temp dir and lets the watchdog go.
func (c *cluster) stop() error {
	var errs []error
	c.dropMu.Lock()
	c.closed = true
	c.dropMu.Unlock()
	if c.drops != nil {
		close(c.drops)
		select {
		case err := <-c.dropped:
			errs = append(errs, err)
		case <-time.After(2 * adminTimeout):
			errs = append(errs, errors.New("test databases still being dropped"))
		}
	}
	c.adminMu.Lock()
	if c.adminConn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.adminConn.Close(ctx)
		cancel()
	}
	c.adminMu.Unlock()
	if c.port != 0 {
		if out, err := c.run(filepath.Join(c.bindir, "pg_ctl"), "stop", "-D", c.data, "-m", "fast", "-w", "-t", strconv.Itoa(waitSeconds)); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %w\n%s", err, out))
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.dir, err))
	}
	c.watchdogIn.Close()
	done := make(chan error, 1)
	go func() { done <- c.watchdog.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * waitSeconds * time.Second):
		errs = append(errs, errors.New("watchdog still running after the cluster stopped"))
	}
	return errors.Join(errs...)
}

// run runs one of the server's programs as the server's user, in the temp dir (root's
// working directory may be closed to that user), and returns what it printed. Its
// output goes to a file, not a pipe: pg_ctl start leaves the server running, and a
// pipe it inherited would never close.
func (c *cluster) run(name string, args ...string) (string, error) {
	out, err := os.CreateTemp(c.dir, "out-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	runErr := cmd.Run()
	printed, _ := os.ReadFile(out.Name())
	return string(printed), runErr
}

// env is the environment of the server's programs: this process's, less PostgreSQL's
// own variables (PGDATA, PGPORT, …) that would point them elsewhere, in the C locale so
// that their messages are the ones startServer looks for.
func (c *cluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// writeFile writes a file of the temp dir readable by the server's user only.
func (c *cluster) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		return os.Chown(path, int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

// Cluster is a throwaway PostgreSQL server of one test's own, which the test may stop
// and start again, as an outage or a failover would, without disturbing the other
// tests' shared cluster.
type Cluster struct{ c *cluster }

// NewCluster starts a cluster of tb's own, stopped and removed when tb ends. On a
// machine that cannot run one it skips tb, or fails it under CI, as NewDatabase does.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := startCluster(nil)
	if err != nil {
		var u unavailableError
		if errors.As(err, &u) && os.Getenv("CI") == "" {
			tb.Skipf("postgrestest: %v", err)
		}
		tb.Fatalf("postgrestest: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.stop(); err != nil {
			tb.Errorf("postgrestest: %v", err)
		}
	})
	return &Cluster{c: c}
}

// NewDatabase creates an empty database on the cluster and returns a URL that connects
// to it as the superuser over TCP.
func (cl *Cluster) NewDatabase(tb testing.TB, name string) string {
	tb.Helper()
	if err := cl.c.admin(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{templateDB}.Sanitize())
		return err
	}); err != nil {
		tb.Fatalf("postgrestest: create database %s: %v", name, err)
	}
	return cl.c.url(name)
}

// Stop stops the server at once, as a crash or a power cut would (immediate mode: no
// checkpoint; what was committed is in the WAL), closing every client's connection.
func (cl *Cluster) Stop(tb testing.TB) {
	tb.Helper()
	cl.c.adminMu.Lock()
	if cl.c.adminConn != nil {
		cl.c.adminConn.Close(context.Background())
		cl.c.adminConn = nil
	}
	cl.c.adminMu.Unlock()
	if out, err := cl.c.run(filepath.Join(cl.c.bindir, "pg_ctl"), "stop", "-D", cl.c.data, "-m", "immediate", "-w",
		"-t", strconv.Itoa(waitSeconds)); err != nil {
		tb.Fatalf("postgrestest: pg_ctl stop: %v\n%s", err, out)
	}
}

// Start starts the server again on the same port, after recovery from its WAL.
func (cl *Cluster) Start(tb testing.TB) {
	tb.Helper()
	logfile := filepath.Join(cl.c.dir, "postgres.log")
	if out, err := cl.c.run(filepath.Join(cl.c.bindir, "pg_ctl"), "start", "-w", "-t", strconv.Itoa(waitSeconds),
		"-D", cl.c.data, "-l", logfile); err != nil {
		log, _ := os.ReadFile(logfile)
		tb.Fatalf("postgrestest: pg_ctl start: %v\n%s\nserver log:\n%s", err, out, tail(log, 4000))
	}
}
