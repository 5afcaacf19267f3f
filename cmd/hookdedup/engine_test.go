package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestDatabase_PostgresRefused: a PostgreSQL URL is never taken for the path of a
// SQLite file (which would make directories named after it, password and all); while
// this build has no PostgreSQL engine, the command says so, without the password.
func TestDatabase_PostgresRefused(t *testing.T) {
	t.Chdir(t.TempDir()) // a file made by mistake lands here
	for _, dsn := range []string{"postgres://hook:s3cret@127.0.0.1:5432/hook", "postgresql://hook:s3cret@127.0.0.1/hook?sslmode=disable"} {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"user", "add", "alice", "--role", "admin", "--database", dsn},
			func(string) string { return "" }, strings.NewReader("a-long-enough-password\n"), &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "PostgreSQL is not supported") {
			t.Errorf("%s: error %v, want one saying PostgreSQL is not supported", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", dsn, err)
		}
		if entries, _ := os.ReadDir("."); len(entries) > 0 {
			t.Errorf("%s: made %v in the working directory", dsn, entries)
		}
	}
}
