package receiver

import (
	"fmt"
	"strings"
	"testing"
)

// TestDocIndex pins the index's lookups to ptrLookup's and textAt's on the same
// canonical document: every pointer names the same value, or nothing, either way.
func TestDocIndex(t *testing.T) {
	var wide strings.Builder
	wide.WriteString("{")
	for i := range 40 {
		if i > 0 {
			wide.WriteString(",")
		}
		fmt.Fprintf(&wide, `"m%02d":{"v":%d}`, i, i)
	}
	wide.WriteString("}")
	docs := []string{
		`{"booking_id":"BK-1","refund":{"amount":"412.50","currency":"EUR"},"status":"cancelled"}`,
		`{"a/b":1,"m~n":{"x":[10,{"y":"z"}]},"q\"uote":"v","":"empty name","nul":null}`,
		`{"tab\tname":"t","é":"accent","rooms":[{"amount":{"value":"1"}}]}`,
		`{}`,
		`[{"a":1},2]`,
		`"just a string"`,
		`12.5`,
		wide.String(),
	}
	pointers := []string{"", "/", "/booking_id", "/refund/amount", "/refund/currency", "/refund/missing",
		"/missing", "/status/deeper", "/a~1b", "/m~0n/x/1/y", "/m~0n/x/0", "/m~0n/x/2", "/m~0n/x/01",
		"/q\"uote", "/tab\tname", "/é", "/rooms/0/amount/value", "/nul", "/0/a", "/1", "/m00/v", "/m39/v", "/m31/v", "/m40/v"}
	for _, raw := range docs {
		doc, _, err := canonicalBody([]byte(raw))
		if err != nil {
			t.Fatalf("canonical %s: %v", raw, err)
		}
		var x docIndex
		x.index(doc)
		for _, p := range pointers {
			wantV, wantOK := ptrLookup(doc, p)
			gotV, gotOK := x.lookup(p)
			if gotV != wantV || gotOK != wantOK {
				t.Errorf("%s: lookup(%q) = %q, %v; ptrLookup gives %q, %v", doc, p, gotV, gotOK, wantV, wantOK)
			}
			if got, want := x.text(p), textAt(doc, p); got != want {
				t.Errorf("%s: text(%q) = %q; textAt gives %q", doc, p, got, want)
			}
		}
	}
	// A document of more members than the index holds is still read whole.
	doc, _, _ := canonicalBody([]byte(wide.String()))
	var x docIndex
	x.index(doc)
	if x.indexed {
		t.Errorf("a top level of 40 members is indexed in room for %d", len(x.members))
	}
	if got := x.text("/m39/v"); got != "39" {
		t.Errorf("text(/m39/v) = %q, want 39", got)
	}
}
