package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKey_SaysWhyNoEventID: for a delivery whose event id is there but not usable,
// `hookdedup key` says why beside the key it derives from the key fields instead, for a
// single delivery and for each item of a batch.
func TestKey_SaysWhyNoEventID(t *testing.T) {
	const single = `
[[source]]
name = "ota"
signature = "none"
event_id = "/id"
key_fields = ["/booking"]
`
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	os.WriteFile(body, []byte(`{"id":1.5,"booking":"BK-1"}`), 0o600)
	out, err := keyWith(t, dir, single, "", "--source", "ota", body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `derived from key fields (event id "/id" is 1.5, not an integer)`; !strings.Contains(out, want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}

	batch := filepath.Join(dir, "batch.json")
	os.WriteFile(batch, []byte(`{"Events":[{"Id":"e1","Discriminator":"A","Value":1},{"Id":null,"Discriminator":"B","Value":2}]}`), 0o600)
	out, err = keyWith(t, dir, mewsConfig+`event_id = "/Id"`+"\n", "", "--source", "mews", batch)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "event id (from /Id)") || !strings.Contains(out, `derived from key fields (event id "/Id" is null)`) {
		t.Errorf("output does not give item 0's event id and why item 1 has none:\n%s", out)
	}
}
