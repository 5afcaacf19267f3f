package web_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// recordBatch stores a batched request of three items, the second a duplicate of a
// delivery made before it, and returns the items.
func recordBatch(t *testing.T, db *sqlite.DB) []*storage.Delivery {
	t.Helper()
	ctx := context.Background()
	item := func(key, status string) *storage.Delivery {
		return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", KeyFrom: "/id",
			PayloadHash: "h-" + key, EventStatus: status, ContentType: "application/json",
			Body: []byte(`{"id":"` + key + `","status":"` + status + `"}`)}
	}
	claim := storage.ClaimOptions{TTL: 24 * time.Hour}
	if err := db.Record(ctx, item("evt_b", "REFUND"), claim); err != nil {
		t.Fatal(err)
	}
	items := []*storage.Delivery{item("evt_a", "CAPTURE"), item("evt_b", "REFUND"), item("evt_c", "CANCELLATION")}
	items[0].Headers = http.Header{"Content-Type": {"application/json"}, "X-Request": {"one"}}
	if err := db.RecordBatch(ctx, items, claim); err != nil {
		t.Fatal(err)
	}
	return items
}

func TestConsole_Batch(t *testing.T) {
	e := newConsoleEnv(t)
	items := recordBatch(t, e.db)
	c := e.as(t, "viewer")

	t.Run("ItemPage", func(t *testing.T) {
		code, p := c.page(fmt.Sprintf("/events/%d", items[1].ID))
		if code != http.StatusOK {
			t.Fatalf("GET = %d", code)
		}
		b := p.testid("batch")
		if got := b.tag("h2").text(); got != fmt.Sprintf("Item 2 of 3 of batch %d", items[0].ID) {
			t.Fatalf("batch heading %q", got)
		}
		rows := p.testid("batch-item")
		if rows.len() != 3 {
			t.Fatalf("%d items listed, want 3", rows.len())
		}
		hrefs := b.hrefs()
		for _, want := range []string{
			fmt.Sprintf("/events/%d", items[0].ID), fmt.Sprintf("/events/%d", items[2].ID),
			"/events?key=evt_a&source=ota", "/events?key=evt_b&source=ota", "/events?key=evt_c&source=ota",
		} {
			if !slices.Contains(hrefs, want) {
				t.Errorf("batch links %v lack %s", hrefs, want)
			}
		}
		if slices.Contains(hrefs, fmt.Sprintf("/events/%d", items[1].ID)) {
			t.Errorf("the item shown links to itself")
		}
		if !strings.Contains(p.testid("batch-headers").text(), "item 1") {
			t.Errorf("an item past the first does not say where the request's headers are")
		}
	})

	t.Run("FirstItemKeepsHeaders", func(t *testing.T) {
		_, p := c.page(fmt.Sprintf("/events/%d", items[0].ID))
		if p.testid("batch-headers").len() != 0 || !strings.Contains(p.testid("headers").text(), "X-Request") {
			t.Fatal("the first item does not show the request's headers")
		}
	})

	t.Run("List", func(t *testing.T) {
		_, p := c.page("/events?source=ota&key=evt_c")
		if got := p.testid("event-batch").text(); got != fmt.Sprintf("item 3 of batch %d", items[0].ID) {
			t.Fatalf("list says %q for the batch item", got)
		}
	})

	// The item's page links to its batch in the events list, which lists the request's
	// items and nothing else: not the single delivery of evt_b made before it.
	t.Run("BatchFilter", func(t *testing.T) {
		_, p := c.page(fmt.Sprintf("/events/%d", items[1].ID))
		want := fmt.Sprintf("/events?batch=%d", items[0].ID)
		if got := p.testid("batch-events").attrs("href"); !slices.Contains(got, want) {
			t.Fatalf("batch link %v, want %s", got, want)
		}
		_, p = c.page(want)
		got := p.testid("event-row").len()
		if got != 3 || p.testid("event-batch").len() != 3 || p.testid("filter-batch").attrs("value")[0] != fmt.Sprint(items[0].ID) {
			t.Fatalf("the batch filter lists %d items, want the request's 3", got)
		}
		if code, _ := c.page("/events?batch=x"); code != http.StatusBadRequest {
			t.Errorf("batch=x: %d, want 400 naming the batch", code)
		}
	})

	t.Run("CSV", func(t *testing.T) {
		_, body, _ := c.do(http.MethodGet, "/events.csv?source=ota&key=evt_c", nil)
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(recs) != 2 {
			t.Fatalf("csv: %v, %d records", err, len(recs))
		}
		head, row := recs[0], recs[1]
		col := func(name string) string { return row[slices.Index(head, name)] }
		if col("batch") != fmt.Sprint(items[0].ID) || col("batch_index") != "2" {
			t.Fatalf("csv batch %q index %q", col("batch"), col("batch_index"))
		}
	})
}

func TestAPI_BatchItems(t *testing.T) {
	e := newAPIEnv(t)
	items := recordBatch(t, e.db)
	code, out := e.call(t, storage.RoleViewer, "GET", fmt.Sprintf("/api/v1/deliveries/%d", items[2].ID), "")
	d, _ := out["delivery"].(map[string]any)
	if code != 200 || d["batch"] != idStr(items[0].ID) || d["batch_index"] != float64(2) {
		t.Fatalf("%d %v, want batch %d index 2", code, d, items[0].ID)
	}
	_, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?key=evt_b", "")
	list, _ := out["deliveries"].([]any)
	var indexes []string
	for _, x := range list {
		indexes = append(indexes, fmt.Sprint(x.(map[string]any)["batch_index"]))
	}
	if len(list) != 2 || !slices.Contains(indexes, "1") || !slices.Contains(indexes, "<nil>") {
		t.Fatalf("deliveries of evt_b: %v, want the single one without a batch and the item at index 1", list)
	}
	_, out = e.call(t, storage.RoleViewer, "GET", fmt.Sprintf("/api/v1/deliveries?batch=%d", items[0].ID), "")
	if list, _ := out["deliveries"].([]any); len(list) != 3 {
		t.Fatalf("deliveries of batch %d: %d, want its 3 items", items[0].ID, len(list))
	}
}

// A key filter matches the key as stored: one that ends in U+00A0 is another key than the
// one without it, and its link (or the escape typed back) lists it alone; ASCII spaces
// typed around a value are trimmed.
func TestConsole_KeyFilterKeepsUnicodeSpaces(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	for _, key := range []string{"evt_nb", "evt_nb\u00a0"} {
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", KeyFrom: "/id", PayloadHash: key,
			Booking: "BK\u00a0", Body: []byte(`{}`)}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	c := e.as(t, "viewer")
	for _, tc := range []struct {
		query string
		want  int
		nbsp  bool // the rows listed are of the key that ends in U+00A0
	}{
		{"key=" + url.QueryEscape("evt_nb\u00a0") + "&source=ota", 1, true},
		{"key=" + url.QueryEscape(" evt_nb\t") + "&source=ota", 1, false},
		{"booking=" + url.QueryEscape("BK\u00a0"), 2, false},
		{"booking=BK", 0, false},
	} {
		code, p := c.page("/events?" + tc.query)
		if code != http.StatusOK {
			t.Fatalf("GET /events?%s = %d", tc.query, code)
		}
		rows := p.testid("event-row")
		if got := rows.len(); got != tc.want {
			t.Errorf("/events?%s lists %d rows, want %d", tc.query, got, tc.want)
		}
		// The booking's escape, and the key's when it is the one ending in U+00A0.
		if got := strings.Count(rows.text(), `\u00a0`) == 2; tc.want == 1 && got != tc.nbsp {
			t.Errorf("/events?%s lists %q; want the key ending in U+00A0: %v", tc.query, rows.text(), tc.nbsp)
		}
	}
}

// TestConsole_SourceFilterKeepsUnicodeSpaces: the events list's and the ledger's source
// filters match the source as stored: "ota" followed by U+00A0 (an unknown source anyone
// can make by posting to it) lists its own deliveries, not ota's; ASCII spaces and tabs
// typed around a value are trimmed.
func TestConsole_SourceFilterKeepsUnicodeSpaces(t *testing.T) {
	e := newConsoleEnv(t)
	odd := &storage.Delivery{Source: "ota\u00a0", Outcome: storage.Rejected, Status: 404, Error: `unknown source "ota\u00a0"`}
	if err := e.db.Record(context.Background(), odd, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	v := e.as(t, "viewer")
	for _, tc := range []struct {
		source string
		want   []int64
	}{
		{"ota\u00a0", []int64{odd.ID}},
		{" ota\t", []int64{e.rejected.ID, e.dup.ID, e.first.ID}},
	} {
		code, p := v.page("/events?" + url.Values{"source": {tc.source}}.Encode())
		if code != http.StatusOK {
			t.Fatalf("events of source %q: %d", tc.source, code)
		}
		var ids []int64
		for _, s := range p.testid("event-link").list {
			id, _ := strconv.ParseInt(nodes{list: []*html.Node{s}}.text(), 10, 64)
			ids = append(ids, id)
		}
		slices.Sort(ids)
		slices.Sort(tc.want)
		if !slices.Equal(ids, tc.want) {
			t.Errorf("events of source %q: deliveries %v, want %v", tc.source, ids, tc.want)
		}
	}
	if _, p := v.page("/ledger?" + url.Values{"source": {" ota\t"}}.Encode()); p.testid("ledger-row").len() == 0 {
		t.Fatal("the ledger of source ota has no rows")
	}
	if _, p := v.page("/ledger?" + url.Values{"source": {"ota\u00a0"}}.Encode()); p.testid("ledger-row").len() != 0 {
		t.Errorf("the ledger of source %q shows ota's rows: %q", "ota\u00a0", p.testid("ledger-row").text())
	}
}
