package receiver

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
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
		if m := docIndexMismatch(doc, pointers); m != "" {
			t.Error(m)
		}
	}
	// A document of more members than the index holds is still read whole.
	doc, _, _ := canonicalBody([]byte(wide.String()))
	var x docIndex
	x.index(doc, nil)
	if x.indexed {
		t.Errorf("a top level of 40 members is indexed in room for %d", len(x.members))
	}
	if got := x.text("/m39/v"); got != "39" {
		t.Errorf("text(/m39/v) = %q, want 39", got)
	}
}

// TestDocIndex_Generated pins the index to ptrLookup and textAt on generated documents:
// names with escapes, quotes, slashes, tildes and characters outside the BMP, values
// nested several deep, top levels of up to twice the members the index holds, arrays
// and scalars at the top; pointers to every member at every depth, to members that are
// not there, and through scalars.
func TestDocIndex_Generated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "ab", "a\u0062", "", "/", "~", "~1", "a/b", "m~n", "q\"", "\\", "é", "😀", "\u00e9", "e\u0301",
		"\t", "amount", "currency", "booking_id", "0", "01", "-"}
	var value func(depth int) (string, [][]string)
	value = func(depth int) (string, [][]string) {
		switch k := rng.IntN(8); {
		case depth > 4 || k < 3:
			return []string{`null`, `true`, `1`, `-0.5`, `1e3`, `"x"`, `"\u0000\n"`, `"é😀"`}[rng.IntN(8)], nil
		case k < 6:
			n := rng.IntN(40)
			if depth > 0 {
				n = rng.IntN(5)
			}
			seen := map[string]bool{}
			var b strings.Builder
			var paths [][]string
			b.WriteString("{")
			for range n {
				name := names[rng.IntN(len(names))]
				if rng.IntN(3) == 0 {
					name = fmt.Sprintf("m%d", rng.IntN(100))
				}
				if seen[name] {
					continue
				}
				seen[name] = true
				if b.Len() > 1 {
					b.WriteString(",")
				}
				enc, _ := json.Marshal(name)
				if rng.IntN(3) == 0 {
					enc = []byte(uEscaped(name)) // as a provider may spell it
				}
				v, sub := value(depth + 1)
				b.Write(enc)
				b.WriteString(":")
				b.WriteString(v)
				paths = append(paths, []string{name})
				for _, s := range sub {
					paths = append(paths, append([]string{name}, s...))
				}
			}
			b.WriteString("}")
			return b.String(), paths
		default:
			n := rng.IntN(4)
			var b strings.Builder
			var paths [][]string
			b.WriteString("[")
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				v, sub := value(depth + 1)
				b.WriteString(v)
				paths = append(paths, []string{fmt.Sprint(i)})
				for _, s := range sub {
					paths = append(paths, append([]string{fmt.Sprint(i)}, s...))
				}
			}
			b.WriteString("]")
			return b.String(), paths
		}
	}
	escape := strings.NewReplacer("~", "~0", "/", "~1")
	for range 1500 {
		raw, paths := value(0)
		doc, _, err := canonicalBody([]byte(raw))
		if err != nil {
			t.Fatalf("canonical %s: %v", raw, err)
		}
		var pointers []string
		for _, p := range paths {
			var b strings.Builder
			for _, tok := range p {
				b.WriteString("/" + escape.Replace(tok))
			}
			pointers = append(pointers, b.String(), b.String()+"/missing", b.String()+"/0")
		}
		pointers = append(pointers, "", "/", "/missing", "/a~1b", "/m~0n", "/0", "/m1/0")
		if m := docIndexMismatch(doc, pointers); m != "" {
			t.Fatal(m)
		}
	}
}

// uEscaped is s as a JSON string whose every character is a \u escape.
func uEscaped(s string) string {
	var b strings.Builder
	b.WriteString(`"`)
	for _, u := range utf16.Encode([]rune(s)) {
		fmt.Fprintf(&b, `\u%04x`, u)
	}
	b.WriteString(`"`)
	return b.String()
}

// docIndexMismatch is the first pointer of pointers whose lookup or text in doc, indexed,
// differs from ptrLookup's or textAt's walk of doc, said as a test failure; "" if none.
func docIndexMismatch(doc string, pointers []string) string {
	var x docIndex
	x.index(doc, nil)
	for _, p := range pointers {
		wantV, wantOK := ptrLookup(doc, p)
		gotV, gotOK := x.lookup(p)
		if gotV != wantV || gotOK != wantOK {
			return fmt.Sprintf("%s: lookup(%q) = %q, %v; ptrLookup gives %q, %v", doc, p, gotV, gotOK, wantV, wantOK)
		}
		if got, want := x.text(p), textAt(doc, p); got != want {
			return fmt.Sprintf("%s: text(%q) = %q; textAt gives %q", doc, p, got, want)
		}
	}
	return ""
}
