package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestKey_BusinessKeyBlocks: on a source with business_key_blocks, intake answers a
// delivery whose business key an accepted delivery of another key carries within the
// window as that delivery's duplicate, and hands it nowhere; so does an item whose
// business key an earlier item of its request carries. `hookdedup key` says so of
// both, as the key lab does, instead of that a delivery of it would be accepted.
func TestKey_BusinessKeyBlocks(t *testing.T) {
	const config = `
[[source]]
name = "pms"
signature = "none"
event_id = "/id"
key_fields = ["/id"]
business_key = ["/booking", "/status"]
business_key_blocks = true

[[source]]
name = "pms-batch"
signature = "none"
batch = "#"
event_id = "/id"
key_fields = ["/id"]
business_key = ["/booking", "/status"]
business_key_blocks = true
`
	_, sources, err := loadSources(t, config, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The database `hookdedup key` reads (keyWith) is the one intake writes here.
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "test.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mux := http.NewServeMux()
	receiver.New(receiver.Config{Sources: sources, Store: db}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(source, body string) string {
		t.Helper()
		resp, err := http.Post(srv.URL+"/webhooks/"+source, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("intake: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	if a := post("pms", `{"id":"evt-1","booking":"B-1","status":"cancelled"}`); !strings.Contains(a, `"accepted"`) {
		t.Fatalf("the first delivery: %s", a)
	}

	// Sent again under a new id.
	resent := `{"id":"evt-2","booking":"B-1","status":"cancelled"}`
	out, err := keyWith(t, dir, config, resent, "--source", "pms")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "business key repeats delivery 1's") || strings.Contains(out, "would be accepted") {
		t.Errorf("key on a delivery its business key blocks:\n%s", out)
	}
	if a := post("pms", resent); !strings.Contains(a, `"duplicate"`) || !strings.Contains(a, `"first_delivery":"1"`) {
		t.Fatalf("intake answered %s; the premise (blocked as delivery 1's duplicate) does not hold", a)
	}

	// Two items of one request under two ids with one business key, and a third of its own.
	batch := `[{"id":"evt-3","booking":"B-2","status":"cancelled"},{"id":"evt-4","booking":"B-2","status":"cancelled"},` +
		`{"id":"evt-5","booking":"B-3","status":"cancelled"}]`
	out, err = keyWith(t, dir, config, batch, "--source", "pms-batch")
	if err != nil {
		t.Fatal(err)
	}
	_, item1, _ := strings.Cut(out, "item 1")
	item1, item2, _ := strings.Cut(item1, "item 2")
	if !strings.Contains(item1, "business key repeats item 0's") || strings.Contains(item1, "would be accepted") {
		t.Errorf("item 1, whose business key item 0 carries, is not said to be blocked:\n%s", out)
	}
	if !strings.Contains(item2, "would be accepted") {
		t.Errorf("item 2, of a business key of its own, is not said to be accepted:\n%s", out)
	}
	a := post("pms-batch", batch)
	if !strings.Contains(a, `{"index":1,"status":"duplicate"`) || !strings.Contains(a, `{"index":2,"status":"accepted"`) {
		t.Fatalf("intake answered %s; the premise (item 1 blocked, item 2 accepted) does not hold", a)
	}
}
