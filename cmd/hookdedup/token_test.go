package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_TokenFlagsBeforeSubcommand: "token --database a.db list" is refused as a
// usage error naming the flag, as audit refuses it, instead of failing on (or opening
// and migrating) ./hookdedup.db, a database never asked for.
func TestCLI_TokenFlagsBeforeSubcommand(t *testing.T) {
	flagsBeforeSubcommand(t, "token")
}

// TestCLI_TokenUsageBeforeDatabase: a mistaken token command line is refused for what
// is wrong with it, before any database is looked for, let alone opened and migrated.
func TestCLI_TokenUsageBeforeDatabase(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "lis", "--database", none}, "usage: hookdedup token"},
		{[]string{"token", "add", "--database", none}, "usage: hookdedup token"},
		{[]string{"token", "revoke", "one", "--database", none}, `token revoke: "one" is not a token id`},
	} {
		out, code := cli(t, dir, nil, "", c.args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "no database") {
			t.Errorf("%q: exit %d, want 1 saying %q\n%s", c.args, code, c.want, out)
		}
	}
}
