package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// idsDowngrade puts users and tokens back as earlier versions made them, without
// AUTOINCREMENT, on a connection without foreign keys (as the rebuild of users then
// takes no rows along).
var idsDowngrade = []string{
	`CREATE TABLE users_old (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    role          TEXT    NOT NULL,
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
, must_change_password INTEGER NOT NULL DEFAULT 0)`,
	`INSERT INTO users_old SELECT * FROM users`,
	`CREATE TABLE tokens_old (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
)`,
	`INSERT INTO tokens_old SELECT * FROM tokens`,
	`PRAGMA legacy_alter_table = ON`, // the references to users stay as they are
	`DROP TABLE tokens`,
	`DROP TABLE users`,
	`ALTER TABLE users_old RENAME TO users`,
	`ALTER TABLE tokens_old RENAME TO tokens`,
	`DELETE FROM sqlite_sequence WHERE name IN ('users', 'tokens')`,
	`DELETE FROM migrations WHERE name = 'migrations/0042_ids_not_reused.sql'`,
}

// TestOpen_IDsUpgrade: a database of an earlier version, whose newest user and token
// were removed, opened by this one, keeps every user, token, session and device, and
// gives neither the removed user's id nor the removed token's again, the token's being
// in the audit log. A migration that fails leaves the database as it was.
func TestOpen_IDsUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	now := time.Now()
	users := map[string]storage.User{}
	tokens := map[string]string{}
	for _, n := range []string{"ada", "bo", "cy"} {
		role := storage.RoleOperator
		if n == "ada" {
			role = storage.RoleAdmin
		}
		users[n] = storagetest.CreateUser(t, db, n, role, "pw-"+n+"-1234567")
		tok, _, err := db.CreateToken(ctx, n, "scripts", n)
		if err != nil {
			t.Fatal(err)
		}
		tokens[n] = tok
	}
	session, err := db.CreateSession(ctx, users["bo"], now)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RememberDevice(ctx, "bo", "device-of-bo", now, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "cy", "ada"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, idsDowngrade...)

	// Made to fail at its last statement, the migration leaves the tables as they were.
	execFile(t, path, `DROP INDEX devices_seen`, `CREATE TABLE devices_seen (x)`)
	if _, err := sqlite.Open(path, sqlite.Options{}); err == nil {
		t.Fatal("the migration did not fail")
	}
	raw := rawDB(t, path)
	var n int
	if err := raw.QueryRow(`SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM tokens) +
		(SELECT count(*) FROM sessions) + (SELECT count(*) FROM devices)`).Scan(&n); err != nil || n != 6 {
		t.Fatalf("after the failed migration: %d rows in users, tokens, sessions and devices (%v), want 6", n, err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE '%\_new' ESCAPE '\'
		OR (name IN ('users', 'tokens') AND sql LIKE '%AUTOINCREMENT%')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the failed migration: %d tables of it left (%v)", n, err)
	}
	raw.Close()
	execFile(t, path, `DROP TABLE devices_seen`, `CREATE INDEX devices_seen ON devices (seen_at)`)

	up := storagetest.OpenPath(t, path, sqlite.Options{})
	for _, n := range []string{"ada", "bo"} {
		if u, err := up.TokenUser(ctx, tokens[n]); err != nil || u.ID != users[n].ID {
			t.Errorf("%s's token after the upgrade: %+v, %v", n, u, err)
		}
	}
	if s, err := up.SessionByID(ctx, session); err != nil || s.User.Name != "bo" {
		t.Errorf("bo's session after the upgrade: %+v, %v", s, err)
	}
	if ok, err := up.KnownDevice(ctx, "bo", "device-of-bo", now.Add(-time.Minute)); err != nil || !ok {
		t.Errorf("bo's device after the upgrade: %v, %v", ok, err)
	}
	_, tok, err := up.CreateToken(ctx, "ada", "report", "ada")
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID <= 3 {
		t.Errorf("a new token took the id %d; the removed one's, 3, is in the audit log", tok.ID)
	}
	if dee := storagetest.CreateUser(t, up, "dee", storage.RoleViewer, "pw-dee-1234567"); dee.ID <= users["cy"].ID {
		t.Errorf("a new user took the id %d; the removed one's was %d", dee.ID, users["cy"].ID)
	}
	// The tables that refer to users still do: removing bo takes his token, session and
	// device along.
	if err := up.DeleteUser(ctx, "bo", "ada"); err != nil {
		t.Fatal(err)
	}
	if _, err := up.TokenUser(ctx, tokens["bo"]); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("removed bo's token: %v", err)
	}
	if _, err := up.SessionByID(ctx, session); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("removed bo's session: %v", err)
	}
	raw = rawDB(t, path)
	var schema string
	if err := raw.QueryRow(`SELECT group_concat(type || ' ' || name || ': ' || coalesce(sql, ''), char(10)) FROM sqlite_master
		WHERE tbl_name IN ('users', 'tokens', 'sessions', 'devices')`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"index sessions_user", "index sessions_seen", "index devices_user", "index devices_seen"} {
		if !strings.Contains(schema, want) {
			t.Errorf("after the upgrade the schema lacks %s:\n%s", want, schema)
		}
	}
	if strings.Contains(schema, "_new") {
		t.Errorf("after the upgrade the schema names a table it made:\n%s", schema)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&n); err != nil || n != 0 {
		t.Errorf("foreign key check after the upgrade: %d rows, %v", n, err)
	}
}

// TestOpen_IDsUpgradeOrphans: a database of an earlier version that holds a token,
// session or device of a user no longer there (removed by a connection without foreign
// keys, as the sqlite3 shell's default is) still opens: the rebuilt tables refer to
// users with their constraint on, and copying such a row failed the migration, so
// the upgraded binary refused to start on a database the earlier one ran on. The rows
// of a user that is gone give no access (each is read through its user) and go, as
// the user's removal would have taken them; every other row stays.
func TestOpen_IDsUpgradeOrphans(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	ada := storagetest.CreateUser(t, db, "ada", storage.RoleAdmin, "pw-ada-1-1234567")
	tok, _, err := db.CreateToken(ctx, "ada", "scripts", "ada")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, idsDowngrade...)
	execFile(t, path,
		`INSERT INTO tokens (id, user_id, name, hash, created_at) VALUES (7, 999, 'gone', 'hash-of-gone', 1)`,
		`INSERT INTO sessions (id_hash, user_id, created_at, seen_at) VALUES ('session-of-gone', 999, 1, 1)`,
		`INSERT INTO devices (id_hash, user_id, seen_at) VALUES ('device-of-gone', 999, 1)`)

	up, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open of a database holding rows of a removed user: %v", err)
	}
	defer up.Close()
	if u, err := up.TokenUser(ctx, tok); err != nil || u.ID != ada.ID {
		t.Errorf("ada's token after the upgrade: %+v, %v", u, err)
	}
	raw := rawDB(t, path)
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&n); err != nil || n != 0 {
		t.Errorf("foreign key check after the upgrade: %d rows, %v", n, err)
	}
	if err := raw.QueryRow(`SELECT (SELECT count(*) FROM tokens) + (SELECT count(*) FROM sessions) +
		(SELECT count(*) FROM devices)`).Scan(&n); err != nil || n != 1 {
		t.Errorf("after the upgrade: %d tokens, sessions and devices (%v), want ada's token alone", n, err)
	}
	// The removed token's id, named by no audit row, is still not given again.
	if _, next, err := up.CreateToken(ctx, "ada", "report", "ada"); err != nil || next.ID <= 7 {
		t.Errorf("a new token after the upgrade: id %d, %v; want past 7", next.ID, err)
	}
}

// TestOpen_IDsUpgradeHugeAuditedID: an audit row naming a token id near the largest
// (not one this program writes: a row put there by hand) does not move the tokens'
// counter there, where no id would be left for the next token.
func TestOpen_IDsUpgradeHugeAuditedID(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	storagetest.CreateUser(t, db, "ada", storage.RoleAdmin, "pw-ada-1-1234567")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, idsDowngrade...)
	execFile(t, path, `INSERT INTO audit_log (at, actor, action, reason) VALUES (1, 'ada', 'create token', '"x" (id 9223372036854775000) for ada')`)

	up, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, name := range []string{"one", "two"} {
		if _, tok, err := up.CreateToken(ctx, "ada", name, "ada"); err != nil || tok.ID > 1<<40 {
			t.Errorf("token %s after the upgrade: id %d, %v; want a small id", name, tok.ID, err)
		}
	}
}
