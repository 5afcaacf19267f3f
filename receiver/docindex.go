package receiver

import (
	"strings"

	"github.com/hookdedup/hookdedup/storage"
)

// docIndex is where each member of a canonical document's top-level object lies, found
// in one pass over the document. Intake reads many pointers of one event (its labels,
// its amount, a business key, each correlation rule's booking, amount and currency),
// nearly all of them into the top-level object or one level below it; resolved one by
// one, each would skip every member before its own from the start of the document. With
// the index a pointer's first token is a comparison of names, and only the rest of the
// pointer walks the text, inside its member's value.
type docIndex struct {
	doc string
	// event is the JSON that doc canonicalises, as sent, when known: the digits of an
	// integer past 2^53, which doc holds rounded to a float64, are read from it
	// (exactValue).
	event []byte
	// indexed says members[:n] holds every member of doc's top-level object: false when
	// the top level is not an object, or has more members than members holds (then each
	// lookup walks doc from its start, as ptrLookup does). An array in the struct, not a
	// slice of it: a struct that points into itself escapes to the heap.
	indexed bool
	n       int
	members [32]docMember
}

// docMember is one member of the top-level object: its name (unescaped) and the span of
// its value in the document.
type docMember struct {
	name       string
	start, end int
}

// index indexes doc, a canonical JSON document (one valid JSON text, as Derive gives),
// the canonical form of event, the JSON as sent (nil when not known).
func (x *docIndex) index(doc string, event []byte) {
	x.doc, x.event, x.indexed, x.n = doc, event, false, 0
	i := jsonSkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return
	}
	i = jsonSkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		x.indexed = true
		return
	}
	for {
		if i >= len(doc) || doc[i] != '"' || x.n == len(x.members) {
			return
		}
		end := storage.JSONStringEnd(doc, i)
		name := jsonStringValue(doc[i:end])
		i = jsonSkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return
		}
		i = jsonSkipSpace(doc, i+1)
		vend := jsonSkipValue(doc, i)
		if vend <= i || vend > len(doc) {
			return
		}
		x.members[x.n] = docMember{name: name, start: i, end: vend}
		x.n++
		i = jsonSkipSpace(doc, vend)
		if i >= len(doc) {
			return
		}
		switch doc[i] {
		case ',':
			i = jsonSkipSpace(doc, i+1)
		case '}':
			x.indexed = true
			return
		default:
			return
		}
	}
}

// lookup is ptrLookup on the indexed document: the JSON text of the value that p, an
// RFC 6901 pointer, names, and false if it names nothing.
func (x *docIndex) lookup(p string) (string, bool) {
	if !x.indexed || p == "" {
		return ptrLookup(x.doc, p)
	}
	tok, rest := p[1:], "" // the '/' that pointerProblem guaranteed
	if j := strings.IndexByte(tok, '/'); j >= 0 {
		tok, rest = tok[:j], tok[j:]
	}
	name := ptrUnescape(tok)
	for _, m := range x.members[:x.n] {
		if m.name != name {
			continue
		}
		// Names are unique (jsontext refuses a repeated one): the first match is the
		// only one, as for ptrMember.
		v := x.doc[m.start:m.end]
		if rest == "" {
			return v, true
		}
		return ptrLookup(v, rest)
	}
	return "", false
}

// text is textAt on the indexed document, an integer past 2^53 with its digits as sent
// (exactValue): a label, a booking a correlation rule compares, is an id, not a float.
func (x *docIndex) text(pointer string) string {
	if pointer == "" || x.doc == "" || pointerProblem(pointer) != "" {
		return ""
	}
	v, ok := x.lookup(pointer)
	if ok {
		v, _ = x.exactValue(pointer, v)
	}
	return labelText(v, ok)
}

// exactNumber is v, the text at pointer p, with a number's value as the event spells
// it, exactly, when that is not what the canonical document holds: the document holds
// a float64, and an amount such as 12345678901234567.12 or 0.10000000000000000001 is
// rounded there, so a changed refund would read as the same money and sums would add
// money that was not sent. The number is read as storage.NumberText reads it, as a
// plain decimal ("1e1" is "10"), within its bounds; a string is left as it is. Only
// numbers are looked up again in the event as sent.
func (x *docIndex) exactNumber(p, v string) string {
	if x.event == nil || v == "" {
		return v
	}
	if cv, ok := x.lookup(p); !ok || cv == "" || cv[0] == '"' {
		return v
	}
	raw, ok := ptrLookup(string(x.event), p)
	if !ok {
		return v
	}
	exact, ok := storage.NumberText(raw)
	if !ok || len(exact) > maxText || strings.Contains(exact, "/") {
		return v
	}
	return exact
}

// exactValue is exactAt on the indexed document's event.
func (x *docIndex) exactValue(p, v string) (string, bool) { return exactAt(x.event, p, v) }
