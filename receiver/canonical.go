package receiver

import (
	"bytes"
	"cmp"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// A single-pass RFC 8785 canonicaliser for the bodies that are valid, which is
// nearly all of them. jsontext's Canonicalize decodes into tokens, re-encodes and
// reorders objects through a decoder of its own: most of the intake's CPU besides
// HTTP and SQLite. This one writes the canonical form as it scans and sorts each
// object's members in place. It declines (ok false) whatever it is not sure of:
// malformed JSON, duplicate names, a number outside float64's range, nesting past
// maxJSONDepth. An escaped lone surrogate, which jsontext refuses, is kept as its
// escape (str). The caller then takes the reference path
// (precheckBody and jsontext), so a refused body gets the same error it always got,
// and an accepted one the same bytes: FuzzCanonical holds the two to that.

// canonMember is one object member written to the output: out[start:end] is
// "name":value, out[start:colon] the name as a canonical JSON string. escaped says
// the name holds a backslash escape, so it must be unescaped to be compared.
type canonMember struct {
	start, colon, end int
	escaped           bool
}

// canonState is one canonicalisation. It lives on the stack: appends to a heap
// object's slices pay a write barrier each while the collector runs, which is often.
type canonState struct {
	src     []byte
	out     []byte
	members []canonMember // a stack: each open object's members above its parent's
	scratch []byte        // an object's members while they are put in order
	depth   int
	// digits says which integers written as plain digits stay as written (keepDigits);
	// unheld says an integer float64 cannot hold was met, whatever digits says.
	digits keepDigits
	unheld bool
}

// keepDigits says which integers written as plain digits a canonicalisation keeps as
// written rather than in RFC 8785's spelling.
type keepDigits int

const (
	// keepNone is RFC 8785: every number as the float64 it reads as.
	keepNone keepDigits = iota
	// keepRespelled keeps each integer that RFC 8785 spells otherwise: 16 digits and
	// more, or 1e21 and up, written as its plain digits however it is spelt (2^60 with
	// ".0", 1e21). Keys are made so (appendCanonicalExact), and stay so.
	keepRespelled
	// keepUnheld keeps each integer that float64 cannot hold, whose value RFC 8785
	// changes: 9007199254740993, not 2^60 (appendCanonicalValue).
	keepUnheld
)

// canonScratch is what canonicalisations recycle, in canonScratches.
type canonScratch struct {
	members []canonMember
	scratch []byte
}

var canonScratches = sync.Pool{New: func() any { return new(canonScratch) }}

// appendCanonical appends the RFC 8785 canonical form of src to dst, as jsontext's
// Value.Canonicalize writes it, and reports whether it did; false (dst returned
// unchanged in length) when src is anything but a JSON text that canonicalises
// without error.
func appendCanonical(dst, src []byte) ([]byte, bool) {
	out, ok, _ := appendCanonicalMode(dst, src, keepNone)
	return out, ok
}

// appendCanonicalExact is appendCanonical, except that an integer written as plain
// digits that float64 cannot hold (past 2^53, or 1e21 and up) stays as written:
// RFC 8785 would round 9007199254740993 to 9007199254740992, and key fields that
// differ only there would share a key. Every other value comes out as
// appendCanonical writes it, so keys without such a number do not change.
func appendCanonicalExact(dst, src []byte) ([]byte, bool) {
	out, ok, _ := appendCanonicalMode(dst, src, keepRespelled)
	return out, ok
}

// appendCanonicalValue is appendCanonical, except that an integer written as plain
// digits that float64 cannot hold stays as written: two bodies that differ only in
// such an integer's last digits are told apart, and one that float64 holds (2^60,
// 1e21) comes out as RFC 8785 writes it, however it is spelt.
func appendCanonicalValue(dst, src []byte) ([]byte, bool) {
	out, ok, _ := appendCanonicalMode(dst, src, keepUnheld)
	return out, ok
}

// appendCanonicalMode canonicalises src keeping the digits that digits says; unheld
// reports whether src holds an integer written as plain digits that float64 cannot
// hold, whose value RFC 8785's spelling is not.
func appendCanonicalMode(dst, src []byte, digits keepDigits) (out []byte, ok, unheld bool) {
	sc := canonScratches.Get().(*canonScratch)
	st := canonState{src: src, out: dst, members: sc.members[:0], scratch: sc.scratch[:0], digits: digits}
	i, ok := st.value(st.skipSpace(0))
	if ok {
		ok = st.skipSpace(i) == len(src)
	}
	if cap(st.scratch) <= maxPooledCanon {
		sc.members, sc.scratch = st.members[:0], st.scratch[:0]
		canonScratches.Put(sc)
	}
	if !ok {
		return dst, false, false
	}
	return st.out, true, st.unheld
}

// canonicalize is Value.Canonicalize, on the single-pass path when it can be.
func canonicalize(v []byte) ([]byte, error) {
	if c, ok := appendCanonical(make([]byte, 0, len(v)), v); ok {
		return c, nil
	}
	return canonicalBodyReference(nil, v)
}

func (st *canonState) skipSpace(i int) int {
	for i < len(st.src) {
		switch st.src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value writes the value that starts at src[i] and returns the offset after it.
func (st *canonState) value(i int) (int, bool) {
	if i >= len(st.src) {
		return i, false
	}
	switch c := st.src[i]; {
	case c == '{':
		return st.object(i)
	case c == '[':
		return st.array(i)
	case c == '"':
		n, _, ok := st.str(i)
		return n, ok
	case c == '-' || '0' <= c && c <= '9':
		return st.number(i)
	case c == 't':
		return st.literal(i, "true")
	case c == 'f':
		return st.literal(i, "false")
	case c == 'n':
		return st.literal(i, "null")
	}
	return i, false
}

func (st *canonState) literal(i int, lit string) (int, bool) {
	if len(st.src)-i < len(lit) || string(st.src[i:i+len(lit)]) != lit {
		return i, false
	}
	st.out = append(st.out, lit...)
	return i + len(lit), true
}

func (st *canonState) array(i int) (int, bool) {
	if st.depth++; st.depth > maxJSONDepth {
		return i, false
	}
	st.out = append(st.out, '[')
	i = st.skipSpace(i + 1)
	if i < len(st.src) && st.src[i] == ']' {
		st.out = append(st.out, ']')
		st.depth--
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = st.value(i); !ok {
			return i, false
		}
		i = st.skipSpace(i)
		if i >= len(st.src) {
			return i, false
		}
		switch st.src[i] {
		case ',':
			st.out = append(st.out, ',')
			i = st.skipSpace(i + 1)
		case ']':
			st.out = append(st.out, ']')
			st.depth--
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (st *canonState) object(i int) (int, bool) {
	if st.depth++; st.depth > maxJSONDepth {
		return i, false
	}
	st.out = append(st.out, '{')
	body := len(st.out)
	base := len(st.members)
	i = st.skipSpace(i + 1)
	if i < len(st.src) && st.src[i] == '}' {
		st.out = append(st.out, '}')
		st.depth--
		return i + 1, true
	}
	for {
		if i >= len(st.src) || st.src[i] != '"' {
			return i, false
		}
		m := canonMember{start: len(st.out)}
		var ok bool
		if i, m.escaped, ok = st.str(i); !ok {
			return i, false
		}
		m.colon = len(st.out)
		i = st.skipSpace(i)
		if i >= len(st.src) || st.src[i] != ':' {
			return i, false
		}
		st.out = append(st.out, ':')
		if i, ok = st.value(st.skipSpace(i + 1)); !ok {
			return i, false
		}
		m.end = len(st.out)
		st.members = append(st.members, m)
		i = st.skipSpace(i)
		if i >= len(st.src) {
			return i, false
		}
		if st.src[i] == '}' {
			break
		}
		if st.src[i] != ',' {
			return i, false
		}
		st.out = append(st.out, ',')
		i = st.skipSpace(i + 1)
	}
	if !st.order(body, st.members[base:]) {
		return i, false
	}
	st.members = st.members[:base]
	st.out = append(st.out, '}')
	st.depth--
	return i + 1, true
}

// order puts the members of the object whose members start at out[body:] in RFC 8785
// order (by their names' UTF-16 code units), and reports false if two share a name.
func (st *canonState) order(body int, ms []canonMember) bool {
	sorted := true
	for k := 1; k < len(ms); k++ {
		c := st.compareNames(ms[k-1], ms[k])
		if c == 0 {
			return false
		}
		if c > 0 {
			sorted = false
		}
	}
	if sorted {
		return true
	}
	slices.SortFunc(ms, st.compareNames)
	for k := 1; k < len(ms); k++ {
		if st.compareNames(ms[k-1], ms[k]) == 0 {
			return false
		}
	}
	st.scratch = append(st.scratch[:0], st.out[body:]...)
	st.out = st.out[:body]
	for k, m := range ms {
		if k > 0 {
			st.out = append(st.out, ',')
		}
		st.out = append(st.out, st.scratch[m.start-body:m.end-body]...)
	}
	return true
}

// compareNames compares two members' names as RFC 8785 orders them: by their UTF-16
// code units, once unescaped.
func (st *canonState) compareNames(a, b canonMember) int {
	x, y := st.out[a.start+1:a.colon-1], st.out[b.start+1:b.colon-1]
	if a.escaped || b.escaped {
		// Rare: a name with a quote, a backslash, a control character or a lone
		// surrogate in it.
		return slices.Compare(canonicalUnits(x), canonicalUnits(y))
	}
	return compareUTF16(x, y)
}

// canonicalUnits returns the UTF-16 code units of the canonical JSON string s (quotes
// excluded), undoing the escapes it can hold: \" \\ \b \f \n \r \t, \u00XX and a lone
// surrogate's \udXXX, which stays the one code unit it is.
func canonicalUnits(s []byte) []uint16 {
	out := make([]uint16, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			r, size := utf8.DecodeRune(s[i:])
			out = utf16.AppendRune(out, r)
			i += size
			continue
		}
		switch e := s[i+1]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			v, _ := hex4(s, i+2)
			out = append(out, v)
			i += 4
		default:
			out = append(out, uint16(e))
		}
		i += 2
	}
	return out
}

// compareUTF16 compares x and y, valid UTF-8, by their UTF-16 code units: as by code
// point, except that a character past U+FFFF (a surrogate pair, 0xD800…) sorts before
// one in U+E000…U+FFFF.
func compareUTF16(x, y []byte) int {
	n := min(len(x), len(y))
	i := 0
	for i < n && x[i] == y[i] {
		i++
	}
	if i == n {
		return len(x) - len(y)
	}
	if x[i] < utf8.RuneSelf || y[i] < utf8.RuneSelf {
		return int(x[i]) - int(y[i]) // ASCII sorts below any multi-byte character
	}
	for i > 0 && !utf8.RuneStart(x[i]) {
		i-- // back to the start of the character where they differ
	}
	rx, _ := utf8.DecodeRune(x[i:])
	ry, _ := utf8.DecodeRune(y[i:])
	return cmp.Compare(utf16Key(rx), utf16Key(ry))
}

// utf16Key orders r as its UTF-16 code units do; two characters past U+FFFF keep the
// order of their code points.
func utf16Key(r rune) int64 {
	if r > 0xFFFF {
		return 0xD800<<32 + int64(r) // above every BMP character below the surrogates
	}
	if r >= 0xE000 {
		return 0xE000<<32 + int64(r) // above every surrogate pair
	}
	return int64(r)
}

// str writes the JSON string that starts at src[i] in its canonical spelling, and
// returns the offset after it and whether the spelling holds a backslash.
func (st *canonState) str(i int) (next int, escaped, ok bool) {
	src := st.src
	i++ // '"'
	run := i
	st.out = append(st.out, '"')
	for i < len(src) {
		c := src[i]
		if plainStringByte[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			st.out = append(st.out, src[run:i]...)
			st.out = append(st.out, '"')
			return i + 1, escaped, true
		case c < 0x20:
			return i, false, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false, false
			}
			i += size
			continue
		case c != '\\':
			i++
			continue
		}
		st.out = append(st.out, src[run:i]...)
		if i+1 >= len(src) {
			return i, false, false
		}
		var r rune
		switch e := src[i+1]; e {
		case '"', '\\', '/':
			r, i = rune(e), i+2
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		case 'u':
			v, ok := hex4(src, i+2)
			if !ok {
				return i, false, false
			}
			r, i = rune(v), i+6
			if utf16.IsSurrogate(r) {
				// A high surrogate escaped right before a low one is one character.
				// Any other surrogate is alone, as RFC 8259 allows and serialisers
				// write for text cut in the middle of an emoji: it is kept as its
				// escape, in lower case as ECMAScript's JSON.stringify writes it, so
				// that texts differing only in it stay apart (not read as U+FFFD).
				pair := utf8.RuneError
				if i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
					if v2, ok := hex4(src, i+2); ok {
						pair = utf16.DecodeRune(r, rune(v2))
					}
				}
				if pair == utf8.RuneError {
					run, escaped = i, true
					st.out = appendLoneSurrogate(st.out, v)
					continue
				}
				r, i = pair, i+6
			}
		default:
			return i, false, false
		}
		run = i
		if r < 0x20 || r == '"' || r == '\\' {
			escaped = true
			st.out = appendEscapedRune(st.out, r)
		} else {
			st.out = utf8.AppendRune(st.out, r)
		}
	}
	return i, false, false
}

// plainStringByte marks the bytes that stand for themselves in a string, canonical or
// not: printable ASCII other than '"' and '\\'.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendEscapedRune appends r, a control character, '"' or '\\', escaped as RFC 8785
// (and jsontext) spell it.
func appendEscapedRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
}

// appendLoneSurrogate appends the surrogate v, not half of a pair, as its escape.
func appendLoneSurrogate(dst []byte, v uint16) []byte {
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', hex[v>>12], hex[v>>8&0xf], hex[v>>4&0xf], hex[v&0xf])
}

// hasLoneSurrogate reports whether the canonical JSON string s (quotes included) holds
// an escaped lone surrogate: the only \u escape past U+001F that a canonical string has.
func hasLoneSurrogate(s string) bool {
	for i := 0; i+5 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] == 'u' && s[i+2] == 'd' {
			return true
		}
		i++ // the escaped character, a backslash perhaps
	}
	return false
}

// hex4 reads the four hex digits at src[i:], either case.
func hex4(src []byte, i int) (uint16, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var v uint16
	for _, c := range src[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// number writes the number that starts at src[i] as RFC 8785 spells it: an integer of
// up to 15 characters as written, -0 as 0, anything else as the float64 it reads as,
// in ECMAScript's spelling.
func (st *canonState) number(i int) (int, bool) {
	src := st.src
	start := i
	if src[i] == '-' {
		i++
	}
	digits := func() bool {
		from := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		return i > from
	}
	if i < len(src) && src[i] == '0' {
		i++
	} else if !digits() {
		return i, false
	}
	float := false
	if i < len(src) && src[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
		float = true
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
		float = true
	}
	lit := src[start:i]
	// jsontext copies integers shorter than 16 characters as they are: below 2^53, so
	// their canonical form is the same digits.
	const maxExactIntegerDigits = 16
	if string(lit) == "-0" {
		st.out = append(st.out, '0')
		return i, true
	}
	if !float && len(lit) < maxExactIntegerDigits {
		st.out = append(st.out, lit...)
		return i, true
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return i, false // beyond float64: the reference path says so
	}
	if f == 0 {
		f = 0 // -0.0 is 0
	}
	n := len(st.out)
	st.out = appendES6Float(st.out, f)
	if !float && string(st.out[n:]) != string(lit) {
		held := heldInteger(lit)
		st.unheld = st.unheld || !held
		if st.digits == keepRespelled || st.digits == keepUnheld && !held {
			st.out = append(st.out[:n], lit...)
		}
	}
	if float && st.digits == keepRespelled {
		// A key holds an integer by its value, however it is spelt: 2^60 written
		// with ".0", or 1e21, is the key of its digits, not of RFC 8785's spelling.
		if digits, ok := integerDigits(lit); ok && string(st.out[n:]) != digits {
			st.out = append(st.out[:n], digits...)
		}
	}
	return i, true
}

// integerDigits returns the integer that the JSON number lit (in float64's range) is,
// as plain digits, and true; false when lit is no integer (1.5, 1e-400).
func integerDigits(lit []byte) (string, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	mant, exp10 := lit, 0
	if e := bytes.IndexAny(lit, "eE"); e >= 0 {
		mant = lit[:e]
		exp := lit[e+1:]
		sign := 1
		if exp[0] == '+' || exp[0] == '-' {
			if exp[0] == '-' {
				sign = -1
			}
			exp = exp[1:]
		}
		exp = bytes.TrimLeft(exp, "0")
		if len(exp) > 6 {
			// A mantissa that is not zero is then out of float64's range, or far
			// below one: no integer. Zero is zero whatever its exponent.
			if len(bytes.Trim(mant, "0.")) == 0 {
				return "0", true
			}
			return "", false
		}
		for _, c := range exp {
			exp10 = exp10*10 + int(c-'0')
		}
		exp10 *= sign
	}
	digits := mant
	if dot := bytes.IndexByte(mant, '.'); dot >= 0 {
		exp10 -= len(mant) - dot - 1
		digits = append(slices.Clip(mant[:dot]), mant[dot+1:]...)
	}
	digits = bytes.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp10 = digits[:len(digits)-1], exp10+1
	}
	switch {
	case len(digits) == 0:
		return "0", true
	case exp10 < 0, len(digits)+exp10 > 400:
		return "", false
	}
	out := make([]byte, 0, 1+len(digits)+exp10)
	if neg {
		out = append(out, '-')
	}
	out = append(out, digits...)
	out = append(out, bytes.Repeat([]byte{'0'}, exp10)...)
	return string(out), true
}

// heldInteger reports whether float64 holds the integer lit (plain digits, a sign
// maybe) exactly: whether its bits, from the highest set to the lowest, fit the 53 of
// a float64's mantissa. That is read from the integer itself, in a word when it fits
// one: the exact decimal of a large float64 (strconv's 'f') costs many times more, and
// a body may hold thousands of such numbers.
func heldInteger(lit []byte) bool {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) <= 19 { // below 10^19: a uint64
		var n uint64
		for _, c := range digits {
			n = n*10 + uint64(c-'0')
		}
		return n == 0 || bits.Len64(n)-bits.TrailingZeros64(n) <= 53
	}
	// From 10^19 up, past 2^63, the lowest set bit is 2^11 or higher: the last 11
	// digits, 10^11 being a multiple of 2^11, tell most such integers (ids) at once.
	var low uint64
	for _, c := range digits[len(digits)-11:] {
		low = low*10 + uint64(c-'0')
	}
	if low%(1<<11) != 0 {
		return false
	}
	var n big.Int
	if _, ok := n.SetString(string(digits), 10); !ok {
		return false
	}
	return n.BitLen()-int(n.TrailingZeroBits()) <= 53
}

// appendES6Float appends f as ECMAScript's Number.prototype.toString spells it, which
// is RFC 8785's spelling of a number: the shortest digits that read back as f, plain
// from 1e-6 to 1e21, with an exponent outside.
func appendES6Float(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-07 is e-7.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
