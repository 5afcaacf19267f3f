package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
)

// keyFieldPointers returns the pointers of the key-field table on a page, in order.
func keyFieldPointers(t *testing.T, page string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var table *html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && slices.Contains(n.Attr, html.Attribute{Key: "data-testid", Val: "key-fields"}) {
			table = n
			break
		}
	}
	if table == nil {
		t.Fatal("no key-fields table")
	}
	var out []string
	for n := range table.Descendants() {
		if n.Type != html.ElementNode || n.Data != "tr" || n.Parent.Data != "tbody" {
			continue
		}
		for td := range n.ChildNodes() {
			if td.Type == html.ElementNode && td.Data == "td" {
				var b strings.Builder
				for c := range td.Descendants() {
					if c.Type == html.TextNode {
						b.WriteString(c.Data)
					}
				}
				out = append(out, strings.TrimSpace(b.String()))
				break
			}
		}
	}
	return out
}

// TestConsole_StoredDerivation: a stored delivery's derivation, read back from its
// canonical JSON (which orders members by name), lists the key fields in the order the
// source names them, and flags a key that is not the hash of that JSON.
func TestConsole_StoredDerivation(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")

	// The seeded deliveries carry a key that is not the hash of their canonical JSON.
	code, page := c.get(fmt.Sprintf("/events/%d", e.dup.ID))
	if code != http.StatusOK {
		t.Fatalf("event page: %d", code)
	}
	if got, want := keyFieldPointers(t, page), []string{"/property_id", "/booking_id", "/status"}; !slices.Equal(got, want) {
		t.Errorf("key fields %q, want the source's order %q", got, want)
	}
	if !strings.Contains(page, "does not match the key") {
		t.Error("a key that is not the hash of its canonical JSON is not flagged")
	}

	canonical := `{"/booking_id":"BK-7","/property_id":"HTL-1","/status":"cancelled"}`
	sum := sha256.Sum256([]byte(canonical))
	d := &storage.Delivery{Source: "ota", Key: "derived:" + hex.EncodeToString(sum[:]), KeyMethod: storage.MethodDerived,
		KeyCanonical: canonical, PayloadHash: "h7", Body: []byte(`{}`)}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_, page = c.get(fmt.Sprintf("/events/%d", d.ID))
	if strings.Contains(page, "does not match the key") || !strings.Contains(page, hex.EncodeToString(sum[:])) {
		t.Error("a key that is the hash of its canonical JSON is flagged, or its hash is not shown")
	}
}
