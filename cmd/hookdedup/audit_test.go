package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// auditDB makes a database whose audit log holds rows written by hookdedup's writers,
// texts with a CR LF, quotes, commas and non-ASCII letters among them; it returns its
// path. No process keeps it open.
func auditDB(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "audit.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleOperator, PasswordHash: "x"}, "cli:root"); err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"refund sent twice\r\nby the OTA, \"see\" ticket", "Zoë's <b>&</b> key", "=cmd|' /C calc'!A0", ""} {
		if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota", Key: "k,1",
			Reason: reason, PreviousState: "failed"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// tamper changes the database at path as someone with the file could.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range stmts {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestCLI_AuditVerify runs `hookdedup audit verify` as a binary: exit 0 and a summary
// with an anchor to keep for an intact log, 1 naming the first row that breaks the
// chain, 2 for a usage error or no database.
func TestCLI_AuditVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := auditDB(t, dir)
	db := "--database=" + path

	out, code := cli(t, dir, nil, "", "audit", "verify", db)
	anchorRe := regexp.MustCompile(`--anchor (5:[0-9a-f]{64})\n`)
	m := anchorRe.FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "audit log intact: 5 rows checked, from the genesis to row 5\n") || m == nil {
		t.Fatalf("intact log: exit %d\n%s", code, out)
	}
	anchor := m[1]
	if out, code := cli(t, dir, nil, "", "audit", "verify", db, "--anchor", anchor); code != 0 ||
		!strings.Contains(out, "passes through the anchor, row 5\n") {
		t.Fatalf("with its anchor: exit %d\n%s", code, out)
	}

	// Usage errors: exit 2, saying what was wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit"}, "hookdedup audit: verify or export?"},
		{[]string{"audit", "check"}, `hookdedup audit: unknown subcommand "check"`},
		{[]string{"audit", "verify", db, "--anchor", "5"}, `--anchor "5": want ID:HASH`},
		{[]string{"audit", "verify", db, "--anchor", "five:" + strings.Repeat("a", 64)}, `want ID:HASH`},
		{[]string{"audit", "verify", db, "--anchor", "5:abc"}, `want ID:HASH`},
		// No row has such an id: a mistake in the anchor, not a sign of tampering.
		{[]string{"audit", "verify", db, "--anchor", "0:" + storage.AuditGenesis}, `want ID:HASH`},
		{[]string{"audit", "verify", db, "--anchor", "-5:" + strings.Repeat("a", 64)}, `want ID:HASH`},
		{[]string{"audit", "verify", db, "row5"}, `unexpected argument "row5"`},
		{[]string{"audit", "verify", db, "--since", "5"}, "flag provided but not defined: -since"},
		{[]string{"audit", "export", db}, "--format is required: csv or json"},
		{[]string{"audit", "export", db, "--format", "xml"}, `--format "xml": want csv or json`},
		{[]string{"audit", "verify", "--database", filepath.Join(dir, "none.db")}, "no database at " + filepath.Join(dir, "none.db")},
	} {
		out, code := cli(t, dir, nil, "", tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, want 2 saying %q\n%s", tc.args, code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); !os.IsNotExist(err) {
		t.Errorf("verify of no database made one: %v", err)
	}
	// A file that is not a database (an export, given as --database by mistake): the
	// check could not be made, which is not a broken chain.
	notDB := filepath.Join(dir, "audit.csv")
	if err := os.WriteFile(notDB, []byte("id,at,time,actor,action,source,key,reason,previous_state,hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, dir, nil, "", "audit", "verify", "--database", notDB); code != 2 || !strings.Contains(out, "not a database") {
		t.Errorf("verify of a file that is not a database: exit %d, want 2\n%s", code, out)
	}

	// A row edited: exit 1, naming it.
	tamper(t, path, `UPDATE audit_log SET reason = 'routine' WHERE id = 3`)
	out, code = cli(t, dir, nil, "", "audit", "verify", db)
	if code != 1 || !strings.Contains(out, "2 rows chain, from the genesis to row 2") ||
		!strings.Contains(out, "hookdedup: audit log broken at row 3 (edited): row 3 was edited") {
		t.Fatalf("edited row: exit %d\n%s", code, out)
	}
	// Put back, then a row deleted.
	tamper(t, path, `UPDATE audit_log SET reason = 'Zoë''s <b>&</b> key' WHERE id = 3`)
	if out, code := cli(t, dir, nil, "", "audit", "verify", db, "--anchor", anchor); code != 0 {
		t.Fatalf("put back: exit %d\n%s", code, out)
	}
	tamper(t, path, `DELETE FROM audit_log WHERE id = 2`)
	out, code = cli(t, dir, nil, "", "audit", "verify", db)
	if code != 1 || !strings.Contains(out, "hookdedup: audit log broken at row 3 (deleted): row 2 is missing") {
		t.Fatalf("deleted row: exit %d\n%s", code, out)
	}
	// The last rows deleted: the chain holds, the anchor shows the cut.
	tamper(t, path, `DELETE FROM audit_log WHERE id >= 2`)
	if out, code := cli(t, dir, nil, "", "audit", "verify", db); code != 0 {
		t.Fatalf("cut at the end, no anchor: exit %d\n%s", code, out)
	}
	out, code = cli(t, dir, nil, "", "audit", "verify", db, "--anchor", anchor)
	if code != 1 || !strings.Contains(out, "audit log broken at row 5 (deleted): the log ends at row 1, before the anchor's row 5") {
		t.Fatalf("cut at the end, with the anchor: exit %d\n%s", code, out)
	}
}

// TestCLI_AuditExport exports the log as JSON and CSV, to files (0600) and stdout,
// and recomputes the chain from each with code of its own: a CSV parser that keeps
// every byte (encoding/csv turns a CR LF inside a field into LF) and the encoding as
// documented.
func TestCLI_AuditExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := auditDB(t, dir)
	db := "--database=" + path
	// The hash verify reports, to compare with what the exports recompute.
	out, code := cli(t, dir, nil, "", "audit", "verify", db)
	m := regexp.MustCompile(`last hash: ([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	last := m[1]

	// A file there already, readable by others: replaced by one that is not.
	jsonFile := filepath.Join(dir, "audit.json")
	if err := os.WriteFile(jsonFile, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	csvFile := filepath.Join(dir, "audit.csv")
	for _, f := range []struct{ format, file string }{{"json", jsonFile}, {"csv", csvFile}} {
		out, code := cli(t, dir, nil, "", "audit", "export", db, "--format", f.format, "--output", f.file)
		if code != 0 || !strings.Contains(out, "exported 5 rows, up to row 5 (hash "+last+") to "+f.file) {
			t.Fatalf("export %s: exit %d\n%s", f.format, code, out)
		}
		st, err := os.Stat(f.file)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", f.file, st.Mode(), err)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".audit*")); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}

	raw, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Format  string           `json:"format"`
		Genesis string           `json:"genesis"`
		Rows    []map[string]any `json:"rows"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the JSON export does not parse: %v\n%s", err, raw)
	}
	if doc.Format != "hookdedup audit v1" || doc.Genesis != strings.Repeat("0", 64) || len(doc.Rows) != 5 {
		t.Fatalf("JSON export: format %q genesis %q, %d rows", doc.Format, doc.Genesis, len(doc.Rows))
	}
	var jsonRows []map[string]string
	for _, r := range doc.Rows {
		row := map[string]string{}
		for k, v := range r {
			row[k] = fmt.Sprint(v) // json.Number keeps the digits as written
		}
		jsonRows = append(jsonRows, row)
	}
	if got := recomputeChain(t, doc.Genesis, jsonRows); got != last {
		t.Errorf("JSON export: the chain recomputes to %s, verify says %s", got, last)
	}
	if jsonRows[1]["reason"] != "refund sent twice\r\nby the OTA, \"see\" ticket" || jsonRows[2]["reason"] != "Zoë's <b>&</b> key" {
		t.Errorf("JSON export: texts changed: %q, %q", jsonRows[1]["reason"], jsonRows[2]["reason"])
	}

	csvRaw, err := os.ReadFile(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	records := parseCSVExact(t, string(csvRaw))
	want := []string{"id", "at", "time", "actor", "action", "source", "key", "reason", "previous_state", "hash"}
	if len(records) != 6 || strings.Join(records[0], ",") != strings.Join(want, ",") {
		t.Fatalf("CSV export: %d records, header %q", len(records), records[0])
	}
	var csvRows []map[string]string
	for _, rec := range records[1:] {
		row := map[string]string{}
		for i, name := range records[0] {
			row[name] = rec[i]
		}
		csvRows = append(csvRows, row)
	}
	if got := recomputeChain(t, strings.Repeat("0", 64), csvRows); got != last {
		t.Errorf("CSV export: the chain recomputes to %s, verify says %s", got, last)
	}
	// The two exports hold the same rows, field for field.
	for i := range csvRows {
		for _, name := range want {
			if csvRows[i][name] != jsonRows[i][name] {
				t.Errorf("row %d %s: CSV %q, JSON %q", i+1, name, csvRows[i][name], jsonRows[i][name])
			}
		}
	}

	// To stdout: the same bytes as the file, the summary on stderr.
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"audit", "export", db, "--format", "json"}, func(string) string { return "" },
		strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(raw) || !strings.Contains(stderr.String(), "exported 5 rows") {
		t.Errorf("export to stdout differs from the file's:\n%s\nstderr: %s", stdout.String(), stderr.String())
	}

	// Export reads the database as it is: a tampered row is exported as stored, and the
	// recomputation finds the break.
	tamper(t, path, `UPDATE audit_log SET reason = 'routine' WHERE id = 2`)
	if out, code := cli(t, dir, nil, "", "audit", "export", db, "--format", "csv", "--output", csvFile); code != 0 {
		t.Fatalf("export of a tampered log: exit %d\n%s", code, out)
	}
	csvRaw, err = os.ReadFile(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	records = parseCSVExact(t, string(csvRaw))
	prev := strings.Repeat("0", 64)
	for i, rec := range records[1:] {
		row := map[string]string{}
		for j, name := range records[0] {
			row[name] = rec[j]
		}
		h := chainLink(prev, row)
		if h != row["hash"] {
			if i+1 != 2 {
				t.Errorf("the tampered export breaks at row %d, want 2", i+1)
			}
			break
		}
		prev = h
	}
}

// recomputeChain recomputes each row's hash from genesis, as the README documents it,
// fails the test at the first that differs, and returns the last.
func recomputeChain(t *testing.T, genesis string, rows []map[string]string) string {
	t.Helper()
	prev := genesis
	for _, r := range rows {
		h := chainLink(prev, r)
		if h != r["hash"] {
			t.Fatalf("row %s: recomputed %s, exported %s", r["id"], h, r["hash"])
		}
		prev = h
	}
	return prev
}

// chainLink is one row's hash: SHA-256 over length-prefixed fields, the previous hash
// first.
func chainLink(prev string, r map[string]string) string {
	h := sha256.New()
	for _, v := range []string{prev, "hookdedup audit v1", r["id"], r["at"], r["actor"], r["action"], r["source"], r["key"],
		r["reason"], r["previous_state"]} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// parseCSVExact parses RFC 4180 CSV with LF line ends, keeping every byte of a quoted
// field (a CR LF in it included).
func parseCSVExact(t *testing.T, s string) [][]string {
	t.Helper()
	var records [][]string
	var rec []string
	var field strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && field.Len() == 0:
			for i++; ; i++ {
				if i >= len(s) {
					t.Fatalf("CSV: unterminated quoted field")
				}
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						field.WriteByte('"')
						i++
						continue
					}
					break
				}
				field.WriteByte(s[i])
			}
		case c == ',':
			rec = append(rec, field.String())
			field.Reset()
		case c == '\n':
			records = append(records, append(rec, field.String()))
			rec = nil
			field.Reset()
		default:
			field.WriteByte(c)
		}
	}
	if len(rec) > 0 || field.Len() > 0 {
		t.Fatalf("CSV: the last line does not end")
	}
	return records
}

// fileState is what a check must leave as it is: a file's bytes and modification time.
func fileState(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("%x %d %d", sum, st.Size(), st.ModTime().UnixNano())
}

// preChainDB makes a database with the schema of the migrations before the audit
// chain, as an older hookdedup left it, with one audit row; it returns its path.
func preChainDB(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "old.db")
	raw, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob("../../storage/sqlite/migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	for _, name := range names {
		base := filepath.Base(name)
		if base >= "0016" {
			break
		}
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if _, err := raw.Exec(`INSERT INTO migrations VALUES (?, 1)`, "migrations/"+base); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(`INSERT INTO audit_log (at, actor, action, source, key, reason, previous_state)
		VALUES (1, 'ana', 'release', 'ota', 'k1', 'test', 'failed')`); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCLI_AuditReadOnly: verify and export open the database read-only and never
// migrate it: the file they check keeps its bytes and its time, one whose schema
// predates the chain is refused (exit 2) with what to do, and export never writes over
// the database's -wal or -shm.
func TestCLI_AuditReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	old := preChainDB(t, dir)
	before := fileState(t, old)
	for _, args := range [][]string{{"audit", "verify"}, {"audit", "export", "--format", "csv"}} {
		out, code := cli(t, dir, nil, "", append(args, "--database", old)...)
		if code != 2 || !strings.Contains(out, "predates the audit log's hash chain") || !strings.Contains(out, "hookdedup serve") {
			t.Errorf("%q on a database older than the chain: exit %d, want 2 saying to upgrade it with serve\n%s", args, code, out)
		}
		if after := fileState(t, old); after != before {
			t.Fatalf("%q changed the database it checks: %s, was %s", args, after, before)
		}
	}

	path := auditDB(t, dir)
	db := "--database=" + path
	before = fileState(t, path)
	if out, code := cli(t, dir, nil, "", "audit", "verify", db); code != 0 {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "audit", "export", db, "--format", "json", "--output", filepath.Join(dir, "x.json")); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	if after := fileState(t, path); after != before {
		t.Fatalf("verify and export changed the database they read: %s, was %s", after, before)
	}

	// Not over the database's own files, whether they exist now (the reads above made
	// -wal and -shm, which SQLite needs beside a WAL database) or not.
	for _, side := range []string{"-wal", "-shm", "-journal", ""} {
		out, code := cli(t, dir, nil, "", "audit", "export", db, "--format", "csv", "--output", path+side)
		if code == 0 || !strings.Contains(out, "that is the database") {
			t.Errorf("export over %s: exit %d, want a refusal naming it\n%s", path+side, code, out)
		}
	}
	if after := fileState(t, path); after != before {
		t.Fatalf("export over the database's files changed it: %s, was %s", after, before)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if raw, err := os.ReadFile(path + side); err != nil || bytes.Contains(raw, []byte("previous_state")) {
			t.Errorf("%s: the export was written into it (%v)", side, err)
		}
	}
	if _, err := os.Stat(path + "-journal"); !os.IsNotExist(err) {
		t.Errorf("export made a -journal: %v", err)
	}

	// While another process writes: what it committed into its WAL is checked too.
	live, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.AppendAudit(context.Background(), storage.AuditEntry{Actor: "ana", Action: "reveal secret"}); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, dir, nil, "", "audit", "verify", db); code != 0 || !strings.Contains(out, "6 rows checked") {
		t.Fatalf("verify beside a writer: exit %d\n%s", code, out)
	}
}

// TestAudit_VerifyReadOnlyCopy: audit verify reads an auditor's copy on read-only
// media (here a directory made immutable, which root cannot write either), where SQLite
// cannot make the -shm beside it, and so does backup from it.
func TestAudit_VerifyReadOnlyCopy(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	if out, err := runCmd(t, "first-admin-password\n", "user", "add", "alice", "--role", "admin", "--database", live); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	media := filepath.Join(dir, "usb")
	if err := os.Mkdir(media, 0o700); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(media, "auditor.db")
	if out, err := runCmd(t, "", "backup", "--database", live, copyPath); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := exec.Command("chattr", "+i", media).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", media).Run() })
	out, err := runCmd(t, "", "audit", "verify", "--database", copyPath)
	if err != nil || !strings.Contains(out, "audit log intact") {
		t.Errorf("audit verify of a copy on read-only media: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "", "backup", "--database", copyPath, filepath.Join(dir, "again.db")); err != nil {
		t.Errorf("backup of a copy on read-only media: %v\n%s", err, out)
	}
}

// TestAudit_VerifyAnotherVersionsSchema: audit verify and export ask of a database's
// schema only the audit log's hash chain, on PostgreSQL as on SQLite: a database one
// migration behind this build (an auditor's newer binary, the replicas not upgraded
// yet), or with a migration this build does not know (the auditor's binary older than
// the replicas), is checked as it is and left so, never refused as predating the chain.
func TestAudit_VerifyAnotherVersionsSchema(t *testing.T) {
	ctx := t.Context()
	const pw = "a-long-enough-password\n"
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	url := postgrestest.NewDatabase(t)
	for _, db := range []string{path, url} {
		if out, err := runCmd(t, pw, "user", "add", "alice", "--role", "admin", "--database", db); err != nil {
			t.Fatalf("user add: %v\n%s", err, out)
		}
	}
	lite, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// change applies sql to the database on either engine, as another version left it.
	change := func(sqliteSQL, postgresSQL string) {
		t.Helper()
		if _, err := lite.Exec(sqliteSQL); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, postgresSQL); err != nil {
			t.Fatal(err)
		}
	}
	check := func(schema string) {
		t.Helper()
		for _, db := range []string{path, url} {
			for _, args := range [][]string{{"verify"}, {"export", "--format", "json"}} {
				out, err := runCmd(t, "", append(append([]string{"audit"}, args...), "--database", db)...)
				if err != nil || args[0] == "verify" && !strings.Contains(out, "audit log intact") {
					t.Errorf("%s, %s: audit %s: %v\n%s", displayPath(db), schema, args[0], err, out)
				}
			}
		}
	}

	change(`ALTER TABLE delivery_stats DROP COLUMN unsummed;
		DELETE FROM migrations WHERE name = 'migrations/0035_stats_unsummed.sql'`,
		`ALTER TABLE delivery_stats DROP COLUMN unsummed;
		DELETE FROM migrations WHERE name = 'migrations/0022_stats_unsummed.sql'`)
	check("one migration behind")
	change(`ALTER TABLE delivery_stats ADD COLUMN unsummed INTEGER NOT NULL DEFAULT 0;
		INSERT INTO migrations (name, applied_at) VALUES ('migrations/0035_stats_unsummed.sql', 0), ('migrations/9999_future.sql', 0)`,
		`ALTER TABLE delivery_stats ADD COLUMN unsummed bigint NOT NULL DEFAULT 0;
		INSERT INTO migrations (name, applied_at) VALUES ('migrations/0022_stats_unsummed.sql', 0), ('migrations/9999_future.sql', 0)`)
	check("a migration ahead")
}

// TestCLI_AuditExportMissingDirectory: an export into a directory that is not there
// names that directory, not the temporary file beside the output that the operator
// never gave.
func TestCLI_AuditExportMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	cli := cliOn(auditDB(t, dir))
	missing := filepath.Join(dir, "exports")
	_, err := cli("audit", "export", "--format", "csv", "--output", filepath.Join(missing, "audit.csv"))
	if err == nil || !strings.Contains(err.Error(), "there is no directory "+missing+" to write it in") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("export into a missing directory: %v, want it to name the directory", err)
	}
}
