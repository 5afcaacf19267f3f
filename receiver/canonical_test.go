package receiver

import (
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// canonicalCases are bodies where a hand-written canonicaliser is most likely to drift
// from jsontext's: number spellings, string escapes, member order by UTF-16 code units,
// duplicate names, nesting, and malformed input of every kind.
var canonicalCases = []string{
	ktCancellation,
	// Numbers.
	`1e21`, `1e20`, `-1e21`, `123456789012345678901`, `1E+21`, `1e-6`, `1e-7`, `0.000001`, `0.0000001`,
	`-0`, `-0.0`, `0.0`, `-0e5`, `0e-5`, `1.0`, `1.50`, `100`, `-100`, `1e2`, `1E2`, `1e+2`, `12.5e-1`,
	`999999999999999`, `9999999999999999`, `-999999999999999`, `-9999999999999999`, `9007199254740993`,
	`123456789012345678`, `0.1`, `0.30000000000000004`, `5e-324`, `1e-400`, `-1e-400`,
	`1.7976931348623157e308`, `1.7976931348623157e+308`, `1e309`, `-1e309`, `4.35`, `2e-7`, `1e-06`,
	`[1,-0,0.5,1e100,1e-100,123e-20,333333333.3333333]`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `-a`, `0x10`, `1.e5`, `Infinity`, `NaN`,
	// Strings.
	`"plain"`, `""`, `"\u00e9\u00E9é"`, `"\/"`, `"a\/b"`, `"\b\f\n\r\t"`, `"\u0008\u000c\u000a\u000d\u0009"`,
	`"\u0000\u001f\u001F\u0007"`, `"\u007f\u0080"`, `"\u2028\u2029"`, "\"\u2028\"", `"<>&"`, `"\u003c\u003e\u0026"`,
	`"\"\\"`, `"\u0022\u005c"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"😀"`, `"\ufffd"`, `"\uffff"`, `"\ue000"`,
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`, `"\ud83d\ude00\ud800"`, `"\u12"`, `"\u12g4"`, `"\x"`,
	`"\ude00\ud83d"`, `"\ud83d\ud83d\ude00"`, `"\\ud83d"`, `"\\\ud83d"`, `"\ud83d\u12"`, `"\ud83d`, `"\ud83d\`, `"\uD83D\u0022"`,
	`"\'"`, "\"a\tb\"", "\"a\x01\"", "\"\x7f\"", "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", `"abc`, `"abc\`,
	// Objects: order, names, duplicates.
	`{}`, `{"b":1,"a":2}`, `{"a":1,"b":2}`, `{"a":{"d":1,"c":[{"z":1,"y":2}]},"B":0}`,
	`{"\u00e9":1,"e":2,"z":3,"é":4}`, `{"😀":1,"\ue000":2,"\uffff":3,"a":4}`, `{"\ud83d\ude00":1,"\uff61":2}`,
	`{"\ud83e":1,"\ud83d":2}`, `{"\ud83d":1,"\ud83d":2}`, `{"\ud83d":1,"\uD83D":2}`, `{"\ud83d":1,"\ufffd":2}`,
	`{"\ue000":1,"😀":2,"\ud83d":3,"\ud800":4,"\ud7ff":5,"\ud83d\ud83d":6}`, `{"\ud83d\u0001":1,"\ud83d":2}`,
	`{"a\"b":1,"a":2,"a\\":3,"a\n":4,"a\u0000":5}`, `{"\u0041":1,"A":2}`, `{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`,
	`{"\/":1,"/":2}`, `{"":1,"a":2,"":3}`, `{"":0}`, `{"10":1,"9":2,"1":3}`, `{"ab":1,"a":2,"abc":3,"b":4}`,
	`{"a" : 1 , "b" : [ 1 , 2 ] }`, " \t\n\r{\"a\":1}\r\n\t ", `{"a":1,}`, `{"a":1`, `{"a"}`, `{"a":}`, `{a:1}`,
	`{"a":1}x`, `{"a":1}{}`, `{,}`, `{"a":1 "b":2}`,
	// Arrays and literals.
	`[]`, `[ ]`, `[1,[2,[3,[]]]]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `true`, `false`, `null`, `tru`, `nul`,
	`truex`, `[true,false,null]`, `[nullx]`,
	// Whole bodies.
	``, ` `, "\ufeff{}", "\xef\xbb\xbf{}", `{"a":[1,2,{"b":null}],"c":"d"}`, `{"id":42.0,"a":{"y":1,"x":2}}`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64),
	strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
	`{"z":` + strings.Repeat(`[{"b":1,"a":2},`, 30) + "0" + strings.Repeat("]", 30) + `,"a":0}`,
}

// checkCanonical holds the single-pass canonicaliser to the reference one (jsontext,
// behind the same checks) on body: where it answers, it writes the reference's bytes;
// where it declines, the reference refuses the body too (a declined valid body would
// only be slower, but it would mean the fast path misses a case it should handle).
func checkCanonical(t *testing.T, body []byte) {
	t.Helper()
	got, ok := appendCanonical(nil, body)
	if loneSurrogateIn(body) {
		checkCanonicalLone(t, body, got, ok)
		return
	}
	want, werr := canonicalBodyReference(nil, body)
	switch {
	case ok && werr != nil:
		t.Fatalf("appendCanonical(%q) = %q, but the reference refuses it: %v", body, got, werr)
	case ok && string(got) != string(want):
		t.Fatalf("appendCanonical(%q) = %q, reference %q", body, got, want)
	case !ok && werr == nil:
		t.Fatalf("appendCanonical(%q) declined a body the reference canonicalises as %q", body, want)
	case werr != nil && !errors.Is(werr, ErrNotJSON):
		t.Fatalf("reference error %v does not wrap ErrNotJSON", werr)
	}
	// canonicalBody answers as the reference does, error text included.
	doc, hash, err := canonicalBody(body)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("canonicalBody(%q): err %v, reference %v", body, err, werr)
	}
	// The hash is of the same form, but for the digits of integers float64 cannot hold.
	hashed := want
	if ex, ok := appendCanonicalValue(nil, body); ok {
		hashed = ex
	}
	if err == nil && (doc != string(want) || hash != ktSHA256(string(hashed))) {
		t.Fatalf("canonicalBody(%q) = %q %s, reference %q", body, doc, hash, hashed)
	}
}

// loneSurrogateIn reports whether b holds an escaped lone surrogate.
func loneSurrogateIn(b []byte) bool {
	return string(signature.MendLoneSurrogates([]byte(string(b)))) != string(b)
}

// mendedReference is jsontext's canonical form of body read with each escaped lone
// surrogate as U+FFFD.
func mendedReference(body []byte) ([]byte, error) {
	v := jsontext.Value(signature.MendLoneSurrogates([]byte(string(body))))
	err := v.Canonicalize()
	return v, err
}

// checkCanonicalLone is checkCanonical for a body with an escaped lone surrogate, which
// jsontext refuses and the single-pass canonicaliser keeps as its escape. The reference
// reads the body with each such surrogate as U+FFFD (mendedReference); the canonical
// form, so read and canonicalised again, is the reference's. Where the single-pass
// canonicaliser declines, the reference refuses the body too, and so does canonicalBody;
// where it answers, the reference agrees but for a name that U+FFFD makes a duplicate.
func checkCanonicalLone(t *testing.T, body, got []byte, ok bool) {
	t.Helper()
	want, werr := mendedReference(body)
	if precheckBody(body) != nil {
		werr = precheckBody(body)
	}
	doc, hash, err := canonicalBody(body)
	if !ok {
		if werr == nil || !errors.Is(err, ErrNotJSON) {
			t.Fatalf("appendCanonical(%q) declined; canonicalBody: %v; the reference: %v", body, err, werr)
		}
		return
	}
	if err != nil || doc != string(got) {
		t.Fatalf("canonicalBody(%q) = %q, %v; appendCanonical wrote %q", body, doc, err, got)
	}
	if again, ok := appendCanonical(nil, got); !ok || string(again) != string(got) {
		t.Fatalf("the canonical form %q of %q is not its own canonical form: %q", got, body, again)
	}
	read, rerr := mendedReference(got)
	switch {
	case werr != nil && (rerr == nil || !strings.Contains(werr.Error(), "duplicate")):
		t.Fatalf("appendCanonical(%q) = %q, but the reference refuses it: %v", body, got, werr)
	case werr == nil && (rerr != nil || string(read) != string(want)):
		t.Fatalf("appendCanonical(%q) = %q, read as %q (%v); the reference wrote %q", body, got, read, rerr, want)
	}
	hashed := got
	if ex, ok := appendCanonicalValue(nil, body); ok {
		hashed = ex
	}
	if hash != ktSHA256(string(hashed)) {
		t.Fatalf("canonicalBody(%q): hash %s, want that of %q", body, hash, hashed)
	}
}

func TestCanonical_SameAsReference(t *testing.T) {
	for _, c := range canonicalCases {
		checkCanonical(t, []byte(c))
		// In an object and an array too: a value must end where its container goes on.
		checkCanonical(t, []byte(`{"k":`+c+`,"a":0}`))
		checkCanonical(t, []byte(`[`+c+`,0]`))
	}
}

func TestCompareUTF16(t *testing.T) {
	// In UTF-16 order, a character past U+FFFF (a surrogate pair) sorts before U+E000…
	// U+FFFF, unlike in code point order.
	ordered := []string{"", "A", "a", "ab", "b", "\u00e9", "\u0800", "\ud7ff", "😀", "😀a", "😁", "\ue000", "\uff61", "\uffff"}
	for i, x := range ordered {
		for j, y := range ordered {
			got := compareUTF16([]byte(x), []byte(y))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compareUTF16(%q, %q) = %d; want the sign of %d", x, y, got, i-j)
			}
		}
	}
}

// FuzzCanonical runs checkCanonical on arbitrary bodies.
func FuzzCanonical(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkCanonical(t, body)
	})
}

// BenchmarkCanonicalBody compares, on a realistic 600-byte delivery, the single-pass
// canonicaliser with the reference path it spares: the same bytes out, per body.
func BenchmarkCanonicalBody(b *testing.B) {
	body := []byte(ktCancellation)
	b.Run("SinglePass", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = appendCanonical(buf[:0], body)
		}
	})
	b.Run("Reference", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = canonicalBodyReference(buf[:0], body)
		}
	})
}

// TestHeldInteger: heldInteger agrees with float64's own exact decimal (strconv's 'f')
// on each side of the word it reads small integers in, and past it.
func TestHeldInteger(t *testing.T) {
	two := func(e int) string { return new(big.Int).Lsh(big.NewInt(1), uint(e)).String() }
	plus1 := func(s string) string {
		n, _ := new(big.Int).SetString(s, 10)
		return n.Add(n, big.NewInt(1)).String()
	}
	lits := []string{"0", "1", "-1", "9007199254740991", "9007199254740992", "9007199254740993",
		"-9007199254740993", two(60), plus1(two(60)), "-" + two(63), two(64), plus1(two(64)),
		"9999999999999999999", "10000000000000000000", "1" + strings.Repeat("0", 21),
		"1" + strings.Repeat("0", 22), "1" + strings.Repeat("0", 23), two(100), plus1(two(100)),
		two(1000), "1" + strings.Repeat("0", 307), "12345678901234567890123"}
	for _, lit := range lits {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatFloat(f, 'f', 0, 64) == lit || lit == "-0"
		if got := heldInteger([]byte(lit)); got != want {
			t.Errorf("heldInteger(%s) = %v, want %v", lit, got, want)
		}
	}
}
