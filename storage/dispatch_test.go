package storage

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// An envelope's header is ASCII that net/http sends and every proxy passes, and reads
// as the same JSON as the envelope: characters past ASCII, DEL and control characters
// escaped, astral ones as surrogate pairs.
func TestBatchEnvelopeHeader(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"live":"false"}`, `{"live":"false"}`},
		{`{"City":"Zürich","Name":"東京 😀"}`, `{"City":"Z\u00fcrich","Name":"\u6771\u4eac \ud83d\ude00"}`},
		{"{\"DEL\":\"a\x7fb\"}", `{"DEL":"a\u007fb"}`},
		{`{"Sep":"a` + "\u2028" + `b"}`, `{"Sep":"a\u2028b"}`},
	} {
		got := BatchEnvelopeHeader(c.in)
		if got != c.want {
			t.Errorf("BatchEnvelopeHeader(%q) = %q, want %q", c.in, got, c.want)
		}
		if !httpguts.ValidHeaderFieldValue(got) {
			t.Errorf("%q is no valid header value", got)
		}
		var in, out any
		if json.Unmarshal([]byte(c.in), &in) != nil || json.Unmarshal([]byte(got), &out) != nil {
			t.Fatalf("%q or %q is not JSON", c.in, got)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("%q reads as %v, the envelope as %v", got, out, in)
		}
	}
	// Not from intake, which stores valid JSON only: still a header net/http sends.
	for _, odd := range []string{"a\nb", "a\x00b", "\xff\xfe", "tab\there"} {
		got := BatchEnvelopeHeader(odd)
		if !httpguts.ValidHeaderFieldValue(got) {
			t.Errorf("BatchEnvelopeHeader(%q) = %q: no valid header value", odd, got)
		}
		h := http.Header{}
		h.Set("X-Hookdedup-Batch-Envelope", got)
		if h.Get("X-Hookdedup-Batch-Envelope") != got {
			t.Errorf("%q does not survive as a header", got)
		}
	}
}
