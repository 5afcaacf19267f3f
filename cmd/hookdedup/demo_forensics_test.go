package main

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
)

// demo --forensics, against the configuration demo --print-config prints, leaves one
// double of each kind in the database: a money mismatch and suspects of every kind.
func TestDemo_Forensics(t *testing.T) {
	printed, err := runDemoCmd(t, "--print-config")
	if err != nil {
		t.Fatalf("print-config: %v\n%s", err, printed)
	}
	cfgPath, dbPath, base := startConfigured(t, printed)
	out, err := runDemoCmd(t, "--config", cfgPath, "--database", dbPath, "--url", base, "--forensics")
	if err != nil {
		t.Fatalf("demo --forensics: %v\n%s", err, out)
	}

	raw, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: dbPath}).EscapedPath()+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := raw.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM deliveries WHERE money_mismatch`); n != 1 {
		t.Errorf("%d money mismatches, want 1\n%s", n, out)
	}
	for _, tc := range []struct{ kind, source, other string }{
		{"business_key", "ota", "ota"},
		{"correlation", "payments", "ota"},
		{"late_duplicate", "channel", ""},
	} {
		q := `SELECT count(*) FROM suspects WHERE kind = ? AND source = ? AND other != 0`
		args := []any{tc.kind, tc.source}
		if tc.kind == "correlation" {
			q += ` AND other_source = ? AND rule = 'double-refund'`
			args = append(args, tc.other)
		}
		if n := count(q, args...); n != 1 {
			t.Errorf("%d %s suspects of %s, want 1\n%s", n, tc.kind, tc.source, out)
		}
	}
	if n := count(`SELECT count(*) FROM suspects`); n != 3 {
		t.Errorf("%d suspects, want 3\n%s", n, out)
	}
	for _, want := range []string{"money mismatch", "suspected duplicate", "suspected double refund", "late duplicate"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output does not say %q:\n%s", want, out)
		}
	}
}

// Without the sources it needs, demo --forensics says what is missing and how to get it.
func TestDemo_ForensicsNeedsItsConfig(t *testing.T) {
	cfgPath, dbPath, base := startConfigured(t, `
[[source]]
name = "ota"
signature = "github"
secret = "x"
event_id = "/event_id"
`)
	out, err := runDemoCmd(t, "--config", cfgPath, "--database", dbPath, "--url", base, "--forensics")
	if err == nil || !strings.Contains(err.Error(), "--print-config") || !strings.Contains(err.Error(), "payments") {
		t.Fatalf("demo --forensics = %v, want an error naming the missing source and --print-config\n%s", err, out)
	}
}
