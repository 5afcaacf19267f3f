package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// runCmd runs the command line args and returns its output and error.
func runCmd(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
	return out.String() + errb.String(), err
}

// TestDatabase_PostgresUnreachable: a PostgreSQL URL is never taken for the path of a
// SQLite file (which would make directories named after it, password and all), and a
// server that cannot be reached is an error that names the database without its
// password.
func TestDatabase_PostgresUnreachable(t *testing.T) {
	t.Chdir(t.TempDir()) // a file made by mistake lands here
	for _, dsn := range []string{"postgres://hook:s3cret@127.0.0.1:1/hook", "postgresql://hook:s3cret@127.0.0.1:1/hook?sslmode=disable"} {
		out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", dsn)
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s: error %v, want one naming the server", dsn, err)
		}
		if strings.Contains(out, "s3cret") || (err != nil && strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("%s: the password is shown: %v\n%s", dsn, err, out)
		}
		if entries, _ := os.ReadDir("."); len(entries) > 0 {
			t.Errorf("%s: made %v in the working directory", dsn, entries)
		}
	}
}

// TestDatabase_Postgres: the command line works on a PostgreSQL database as on a file:
// a command that only reads refuses a database hookdedup never set up, without showing
// the password; user add sets it up, and the next command finds the user there.
func TestDatabase_Postgres(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	_, err := runCmd(t, "", "user", "list", "--database", url)
	if !errors.Is(err, storage.ErrNoDatabase) || strings.Contains(err.Error(), passwordOf(t, url)) {
		t.Errorf("user list on an empty database: %v, want no database, password hidden", err)
	}
	if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", url); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	out, err := runCmd(t, "", "user", "list", "--database", url)
	if err != nil || !strings.Contains(out, "alice") {
		t.Errorf("user list: %v\n%s", err, out)
	}
}

// TestMigrate copies a SQLite database into PostgreSQL from the command line: refused
// while serve has the file open, done once it has stopped, and the copied user is then
// there in PostgreSQL. A second copy into the same database is refused.
func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	s := startServe(t, dir, nil) // makes hookdedup.db, with the user admin
	url := postgrestest.NewDatabase(t)
	if out, code := cli(t, dir, nil, "", "migrate", "--to", url); code != 1 || !strings.Contains(out, "stop serve") {
		t.Errorf("migrate while serve runs: %d %s", code, out)
	}
	s.stop(t)
	out, code := cli(t, dir, nil, "", "migrate", "--to", url)
	if code != 0 || !strings.Contains(out, "copied ./hookdedup.db into postgres://postgres:xxxxx@") || !strings.Contains(out, "1 user,") {
		t.Fatalf("migrate: %d\n%s", code, out)
	}
	if strings.Contains(out, passwordOf(t, url)) {
		t.Errorf("migrate shows the password:\n%s", out)
	}
	if out, code := cli(t, dir, nil, "", "user", "list", "--database", url); code != 0 || !strings.Contains(out, "admin") {
		t.Errorf("user list on the copy: %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "migrate", "--to", url); code != 1 || !strings.Contains(out, "not empty") {
		t.Errorf("a second copy into the same database: %d %s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "migrate", "--to", filepath.Join(dir, "x.db")); code == 0 || !strings.Contains(out, "postgres://") {
		t.Errorf("migrate --to a path: %d %s", code, out)
	}
}

// TestDatabase_PasswordInQueryHidden: a database URL may carry its password as a
// parameter (postgres://u@h/db?password=…), which pgx takes as it takes the user
// part's: no message shows it either, whether the server cannot be reached, a copy
// names where it went, or serve's log names the database.
func TestDatabase_PasswordInQueryHidden(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	unreachable := "postgres://hook@127.0.0.1:1/hook?sslmode=disable&password=s3cret"
	out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", unreachable)
	if err == nil || strings.Contains(out+err.Error(), "s3cret") {
		t.Errorf("user add on an unreachable server: %v\n%s", err, out)
	}
	if p := displayPath("postgresql://hook@db.example/hook?PassWord=s3cret&sslpassword=k3y"); strings.Contains(p, "s3cret") || strings.Contains(p, "k3y") {
		t.Errorf("displayPath shows a secret parameter: %s", p)
	}

	u, err := url.Parse(postgrestest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	q := u.Query()
	q.Set("password", pw)
	u.User, u.RawQuery = url.User(u.User.Username()), q.Encode()
	file := filepath.Join(dir, "hookdedup.db")
	if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", file); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	out, err = runCmd(t, "", "migrate", "--database", file, "--to", u.String())
	if err != nil || !strings.Contains(out, "1 user,") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if strings.Contains(out, "password="+pw) {
		t.Errorf("migrate shows the password given as a parameter:\n%s", out)
	}
	// The copy's audit chain verifies from the command line.
	if out, err := runCmd(t, "", "audit", "verify", "--database", u.String()); err != nil || !strings.Contains(out, "audit log intact") {
		t.Errorf("audit verify on the copy: %v\n%s", err, out)
	}
	// A wrong password is said as such, and not shown.
	q.Set("password", "Wr0ngPassw0rd")
	u.RawQuery = q.Encode()
	out, err = runCmd(t, "", "migrate", "--database", file, "--to", u.String())
	if err == nil || !strings.Contains(err.Error(), "password authentication failed") || strings.Contains(out+err.Error(), "Wr0ngPassw0rd") {
		t.Errorf("migrate with a wrong password: %v\n%s", err, out)
	}
}

// passwordOf is the password of the database URL dsn, for a check that no output shows
// it.
func passwordOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok || len(pw) < 8 {
		t.Fatalf("%s: no password to look for", u.Redacted())
	}
	return pw
}

// TestServe_PostgresMigrationEndsOnlyWithTheProcess: serve's schema upgrade is bounded
// by nothing but a stop of the process: past the URL's connect_timeout it still runs
// (here it waits for a lock that a pg_dump-like reader holds), and a stop (SIGTERM,
// Ctrl-C: run's context ending) interrupts it at once, rolled back and saying so.
func TestServe_PostgresMigrationEndsOnlyWithTheProcess(t *testing.T) {
	t.Chdir(t.TempDir())
	url := postgrestest.NewDatabase(t)
	if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", url); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	const last = "migrations/0022_stats_unsummed.sql"
	if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN unsummed;
		DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.WithoutCancel(t.Context())) // lets the migration go, if it still waits
	if _, err := reader.Exec(t.Context(), `BEGIN; LOCK TABLE delivery_stats IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	var out lockedBuffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--database", url + "&connect_timeout=1"},
			func(string) string { return "" }, strings.NewReader(""), &out, &out)
	}()
	select {
	case err := <-done:
		t.Fatalf("serve gave up on its upgrade before it was stopped: %v\n%s", err, out.String())
	case <-time.After(2 * time.Second): // twice the connect limit
	}
	stop()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "migration "+last+" interrupted") || !strings.Contains(err.Error(), "rolled back") {
			t.Errorf("serve stopped during its upgrade: %v, want an error saying the migration was interrupted and rolled back\n%s", err, out.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("serve, stopped during its upgrade, still runs 3 s later:\n%s", out.String())
	}
	var applied bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM migrations WHERE name = '`+last+`')`).Scan(&applied); err != nil || applied {
		t.Errorf("the interrupted migration is recorded as applied (%v)", err)
	}
}

// TestMigrate_MistypedTargetHidden: a --to that is no postgres:// URL but a connection
// string in another form (libpq's keywords, a URL missing a slash) is refused without
// being shown, as it holds the password where no redaction looks for it.
func TestMigrate_MistypedTargetHidden(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, to := range []string{
		"host=db.internal user=hook password=S3CRETPW dbname=hook",
		"postgres:/hook:S3CRETPW@db.internal:5432/hook",
		" postgres://hook:S3CRETPW@db.internal:5432/hook",
		"mysql://hook:S3CRETPW@db.internal/hook",
		"hook:S3CRETPW@db.internal:5432/hook",
	} {
		out, err := runCmd(t, "", "migrate", "--to", to)
		if err == nil || !strings.Contains(err.Error(), "postgres://") {
			t.Errorf("migrate --to %q: %v, want it refused, saying how to write the URL", to, err)
		}
		if strings.Contains(fmt.Sprint(err)+out, "S3CRETPW") {
			t.Errorf("migrate --to %q shows the password: %v\n%s", to, err, out)
		}
	}
}

// TestMigrate_AnotherApplicationsDatabase: migrate from a database setting that names
// another application's SQLite file is refused, naming it, and leaves the PostgreSQL
// database as it was, rather than copying an empty hookdedup schema into it as the
// database moved.
func TestMigrate_AnotherApplicationsDatabase(t *testing.T) {
	dir := t.TempDir()
	app := filepath.Join(dir, "app.db")
	raw, err := sql.Open("sqlite3", "file:"+app)
	if err == nil {
		_, err = raw.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw.Close()
	url := postgrestest.NewDatabase(t)
	out, code := cli(t, dir, nil, "", "migrate", "--database", app, "--to", url)
	if code != 1 || !strings.Contains(out, "another application's") {
		t.Errorf("migrate from another application's database: %d %s", code, out)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("%d tables made in PostgreSQL by a refused migrate, want none", tables)
	}
}
