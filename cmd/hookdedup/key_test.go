package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// keyIn runs `hookdedup key --source mews FILE` on a database that exists.
func keyIn(t *testing.T, dir, file string) (string, error) {
	t.Helper()
	cfg, dbPath := filepath.Join(dir, "hookdedup.toml"), filepath.Join(dir, "test.db")
	if err := os.WriteFile(cfg, []byte(mewsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var out, errb bytes.Buffer
	err = run(context.Background(), []string{"key", "--source", "mews", file, "--config", cfg, "--database", dbPath},
		func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	return out.String(), err
}

const mewsConfig = `
[[source]]
name = "mews"
signature = "token"
token_query = "token"
secret = "mews-url-token-1"
key_fields = ["/Discriminator", "/Value"]
batch = "/Events"
`

// TestKey_Batch: `hookdedup key` explains a batch item by item, and says which item
// would make intake refuse the request.
func TestKey_Batch(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5"}},`+
		`{"Discriminator":"CustomerUpdated","Value":{"Id":"a5"}}]}`), 0o600)
	out, err := keyIn(t, dir, good)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 items at /Events", "item 0", "item 1", `"CustomerAdded"`, `"CustomerUpdated"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "derived:") < 2 {
		t.Errorf("output does not give two keys:\n%s", out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"Events":[{"Discriminator":"CustomerAdded","Value":{"Id":"a5"}},{"Other":1}]}`), 0o600)
	out, err = keyIn(t, dir, bad)
	if err == nil || !strings.Contains(err.Error(), "item 1: no key") || !strings.Contains(out, "item 0") {
		t.Fatalf("err %v, output:\n%s\nwant item 0 explained and item 1 named as the refusal", err, out)
	}
}
