package receiver

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
)

// RFC 6901 JSON pointers, resolved against a document that is already known
// to be one valid JSON text. Derive only looks up pointers after jsontext has
// accepted the body, so these functions skip over values instead of
// validating them: that is what lets the body be parsed once. They still
// stop at the end of doc rather than panic on input that breaks that
// promise.

// pointerProblem says why p is not an RFC 6901 pointer, or returns "" if it
// is one. The empty pointer (the whole document) is valid RFC 6901; callers
// that refuse it do so themselves, with their own reason.
func pointerProblem(p string) string {
	if p == "" {
		return ""
	}
	if p[0] != '/' {
		return `is not a JSON pointer (must start with "/")`
	}
	if !utf8.ValidString(p) {
		// Pointer tokens are compared with object member names, which are
		// valid UTF-8 once jsontext has accepted the body; such a pointer could
		// never match, and could not be written into the canonical JSON of
		// the key fields either.
		return "is not valid UTF-8"
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return `is not a JSON pointer ("~" must be followed by 0 or 1)`
		}
	}
	return ""
}

// ptrLookup returns the JSON text of the value that pointer p names in doc,
// and false if p names nothing there. The text is a slice of doc, so when doc
// is canonical (RFC 8785) the value comes out canonical too: canonical form
// is defined member by member, so a canonical document's sub-values are
// canonical. A pointer only descends through objects and arrays; a token met
// by a scalar names nothing.
func ptrLookup(doc, p string) (string, bool) {
	start, end, ok := ptrSpan(doc, p)
	if !ok {
		return "", false
	}
	return doc[start:end], true
}

// ptrSpan is ptrLookup's answer as offsets into doc, so that a caller holding doc's
// bytes can slice the value from them without a copy.
func ptrSpan(doc, p string) (start, end int, ok bool) {
	i := jsonSkipSpace(doc, 0)
	for rest := p; rest != ""; {
		rest = rest[1:] // the '/' that pointerProblem guaranteed
		tok := rest
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			tok, rest = rest[:j], rest[j:]
		} else {
			rest = ""
		}
		if i >= len(doc) {
			return 0, 0, false
		}
		var ok bool
		switch doc[i] {
		case '{':
			i, ok = ptrMember(doc, i, ptrUnescape(tok))
		case '[':
			i, ok = ptrElement(doc, i, tok)
		}
		if !ok {
			return 0, 0, false
		}
	}
	if i >= len(doc) {
		return 0, 0, false
	}
	return i, jsonSkipValue(doc, i), true
}

// ptrUnescape undoes RFC 6901's escapes in the order §4 prescribes ("~1"
// first), so that "~01" means "~1" and not "/".
func ptrUnescape(tok string) string {
	if strings.IndexByte(tok, '~') < 0 {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// ptrMember returns the offset of the value of the first member called name in the
// object that starts at doc[i]. Where a body repeats a name (a refused body, never
// checked whole) the first is the one: as jsontext, which rejects repeated names,
// reads an accepted body.
func ptrMember(doc string, i int, name string) (at int, ok bool) {
	ptrMembers(doc, i, name, func(j int) bool {
		at, ok = j, true
		return false
	})
	return at, ok
}

// ptrMembers calls yield with the offset of the value of each member called name in
// the object that starts at doc[i], in order, until yield returns false. A body cut
// short ends the walk where it ends.
func ptrMembers(doc string, i int, name string, yield func(int) bool) {
	for i++; ; i++ { // past '{', then past each ','
		i = jsonSkipSpace(doc, i)
		if i >= len(doc) || doc[i] != '"' {
			return // '}': no more members
		}
		end := storage.JSONStringEnd(doc, i)
		match := jsonStringValue(doc[i:end]) == name
		i = jsonSkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return
		}
		i = jsonSkipSpace(doc, i+1)
		if match && !yield(i) {
			return
		}
		i = jsonSkipSpace(doc, jsonSkipValue(doc, i))
		if i >= len(doc) || doc[i] != ',' {
			return
		}
	}
}

// element returns the offset of the element that tok indexes in the array
// that starts at doc[i]. RFC 6901's "-" (the element after the last one) and
// any token that is not a canonical index ("01", "+1", "1e0") name nothing.
func ptrElement(doc string, i int, tok string) (int, bool) {
	n, ok := ptrIndex(tok)
	if !ok {
		return 0, false
	}
	i++ // '['
	for k := 0; ; k++ {
		i = jsonSkipSpace(doc, i)
		if i >= len(doc) || doc[i] == ']' {
			return 0, false
		}
		if k == n {
			return i, true
		}
		i = jsonSkipSpace(doc, jsonSkipValue(doc, i))
		if i >= len(doc) || doc[i] != ',' {
			return 0, false
		}
		i++
	}
}

// ptrIndex parses an RFC 6901 array index. Nine digits are plenty: no body
// within the intake's size limit holds a billion elements, and the bound
// keeps the arithmetic clear of overflow.
func ptrIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// jsonStringValue returns the value of the JSON string literal s (quotes
// included). Canonical documents escape only quotes, backslashes and control
// characters, so the common case is a plain slice; anything else goes
// through encoding/json, which knows every escape, surrogate pairs included.
func jsonStringValue(s string) string {
	if len(s) < 2 {
		return ""
	}
	inner := s[1 : len(s)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var v string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return ""
	}
	return v
}

func jsonSkipSpace(doc string, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonSkipValue returns the offset just past the value that starts at doc[i].
func jsonSkipValue(doc string, i int) int {
	if i >= len(doc) {
		return i
	}
	switch doc[i] {
	case '"':
		return storage.JSONStringEnd(doc, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				j = storage.JSONStringEnd(doc, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(doc)
	default: // number, true, false, null
		j := i
		for j < len(doc) {
			switch doc[j] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// redactFields returns body with the value at each of pointers, where body holds one,
// written as "[redacted]", as a credential header is; body itself when it holds none.
// The rest stays as sent.
//
// The body is one that was refused, often for being odd JSON, so the walk takes it as
// it comes rather than first asking whether it is valid: a member name that repeats
// (jsontext refuses it, encoding/json keeps the last) has every one of its values
// masked, a leading byte-order mark is stepped over, and nesting deeper than
// encoding/json reads does not leave the credential beside it unmasked.
func redactFields(body []byte, pointers []string) []byte {
	if len(pointers) == 0 {
		return body
	}
	doc := string(body)
	start := 0
	if strings.HasPrefix(doc, "\uFEFF") {
		start = len("\uFEFF")
	}
	var spans [][2]int
	for _, p := range pointers {
		if pointerProblem(p) != "" {
			continue
		}
		spans = redactSpans(doc, jsonSkipSpace(doc, start), p, spans)
	}
	if len(spans) == 0 {
		return body
	}
	// A value inside another one masked goes with it. The body is written once, from the
	// first value to the last: a name repeated many times is as many values, and
	// rewriting the whole body for each would take time in their number times its size.
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Or(a[0]-b[0], b[1]-a[1]) })
	out := make([]byte, 0, len(body))
	at := 0
	for _, sp := range spans {
		if sp[0] < at {
			continue
		}
		out = append(out, body[at:sp[0]]...)
		out = append(out, `"[redacted]"`...)
		at = sp[1]
	}
	return append(out, body[at:]...)
}

// redactSpans appends to spans the span of every value that the rest p of a pointer
// names from the value at doc[i]: ptrSpan's walk, but into each member of the name
// where an object repeats it, each of which a reader of the body may take as the one.
func redactSpans(doc string, i int, p string, spans [][2]int) [][2]int {
	if i >= len(doc) {
		return spans
	}
	if p == "" {
		return append(spans, [2]int{i, jsonSkipValue(doc, i)})
	}
	tok, rest := p[1:], ""
	if j := strings.IndexByte(tok, '/'); j >= 0 {
		tok, rest = tok[:j], tok[j:]
	}
	switch doc[i] {
	case '{':
		ptrMembers(doc, i, ptrUnescape(tok), func(j int) bool {
			spans = redactSpans(doc, j, rest, spans)
			return true
		})
	case '[':
		if j, ok := ptrElement(doc, i, tok); ok {
			spans = redactSpans(doc, j, rest, spans)
		}
	}
	return spans
}
