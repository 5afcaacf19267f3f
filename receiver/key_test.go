package receiver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/hookdedup/hookdedup/storage"
)

// ktCancellation is a realistic OTA booking-cancellation delivery (about 600
// bytes), the shape the benchmarks and several tests use.
const ktCancellation = `{
  "event_id": "evt_01HZX3K8Q2V7M5N9P4R6T8W0YB",
  "event_type": "booking.cancelled",
  "created_at": "2025-03-14T09:26:53Z",
  "property_id": "P-10293",
  "booking_id": "BK-7781-2291",
  "status": "cancelled",
  "effective_date": "2025-04-02",
  "channel": {"code": "BDC", "reservation_ref": "4419283375"},
  "guest": {"last_name": "Müller", "first_name": "Zoë", "country": "DE"},
  "stay": {"check_in": "2025-04-02", "check_out": "2025-04-05", "nights": 3,
    "rooms": [{"room_type": "DBL-SUP", "rate_plan": "FLEX-BB", "adults": 2}]},
  "refund": {"amount": 412.50, "currency": "EUR", "policy": "free-48h"},
  "cancelled_by": "guest"
}`

var ktOTAFields = []string{"/property_id", "/booking_id", "/status", "/effective_date"}

func ktDerive(t *testing.T, spec KeySpec, h http.Header, body string) storage.Derivation {
	t.Helper()
	d, err := Derive(spec, h, []byte(body))
	if err != nil {
		t.Fatalf("Derive(%q): %v", body, err)
	}
	return d
}

func ktSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDerive_KnownAnswer pins canonicalisation and hashing to a literal, so a
// change in either (a jcs upgrade, a different member order, another
// spelling of the pointers) fails here instead of silently giving every
// stored event a new key.
func TestDerive_KnownAnswer(t *testing.T) {
	const canonical = `{"/booking_id":"B-1","/property_id":"P-9"}`
	const pinned = "derived:38cc8316878215eea2596361825637eebcebc87f9621da3d86c76ed57f950933"
	spec := KeySpec{KeyFields: []string{"/property_id", "/booking_id"}}
	d := ktDerive(t, spec, nil, `{ "property_id" : "P-9", "booking_id": "B-1", "amount": 1e2 }`)

	if d.Canonical != canonical {
		t.Errorf("Canonical = %s, want %s", d.Canonical, canonical)
	}
	if want := "derived:" + ktSHA256(canonical); d.Key != want {
		t.Errorf("Key = %s, want %s", d.Key, want)
	}
	if d.Key != pinned {
		t.Errorf("Key = %s, want the pinned %s", d.Key, pinned)
	}
	if want := ktSHA256(`{"amount":100,"booking_id":"B-1","property_id":"P-9"}`); d.PayloadHash != want {
		t.Errorf("PayloadHash = %s, want %s", d.PayloadHash, want)
	}
	if d.Method != storage.MethodDerived || d.Hash != strings.TrimPrefix(d.Key, "derived:") || d.EventIDFrom != "" {
		t.Errorf("Derivation = %+v", d)
	}
	wantFields := []storage.Field{
		{Pointer: "/property_id", Present: true, Value: `"P-9"`},
		{Pointer: "/booking_id", Present: true, Value: `"B-1"`},
	}
	if !reflect.DeepEqual(d.Fields, wantFields) {
		t.Errorf("Fields = %+v, want %+v", d.Fields, wantFields)
	}
}

// TestDerive_SameKey lists bodies that must share a key and a payload hash:
// each group differs only in ways RFC 8785 erases.
func TestDerive_SameKey(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/property_id", "/amount", "/stay", "/name"}}
	groups := []struct {
		name   string
		bodies []string
	}{
		{"member order", []string{
			`{"property_id":"P","amount":100,"stay":{"in":"2025-04-02","nights":3},"name":"x"}`,
			`{"name":"x","stay":{"nights":3,"in":"2025-04-02"},"amount":100,"property_id":"P"}`,
		}},
		{"whitespace", []string{
			`{"property_id":"P","amount":100,"stay":[1,2],"name":"x"}`,
			"{\n\t\"property_id\" : \"P\",\r\n  \"amount\":100 ,\"stay\":[ 1 , 2 ],\"name\":\"x\"\n}\n",
			` {"property_id":"P","amount":100,"stay":[1,2],"name":"x"} `,
		}},
		{"number spelling", []string{
			`{"property_id":"P","amount":100,"stay":{"nights":1},"name":"x"}`,
			`{"property_id":"P","amount":1e2,"stay":{"nights":1.0},"name":"x"}`,
			`{"property_id":"P","amount":1E+2,"stay":{"nights":1e0},"name":"x"}`,
			`{"property_id":"P","amount":100.000,"stay":{"nights":10e-1},"name":"x"}`,
			`{"property_id":"P","amount":10000e-2,"stay":{"nights":0.1e1},"name":"x"}`,
		}},
		{"negative zero", []string{
			`{"property_id":"P","amount":0}`,
			`{"property_id":"P","amount":-0}`,
			`{"property_id":"P","amount":-0.0e5}`,
		}},
		{"unicode escapes", []string{
			`{"property_id":"Hôtel é","amount":1,"stay":"😀","name":"a/b"}`,
			`{"property_id":"H\u00f4tel \u00e9","amount":1,"stay":"\ud83d\ude00","name":"a\/b"}`,
			`{"property_id":"H\u00F4tel \u00E9","amount":1,"stay":"\uD83D\uDE00","name":"\u0061\u002f\u0062"}`,
		}},
		{"escaped member names", []string{
			`{"property_id":"P","amount":1}`,
			`{"\u0070roperty_id":"P","am\u006Funt":1}`,
		}},
		{"nested values", []string{
			`{"property_id":"P","stay":{"rooms":[{"type":"DBL","adults":2},{"type":"SGL","adults":1}],"from":"2025-04-02"}}`,
			`{"stay":{"from":"2025-04-02","rooms":[{"adults":2.0,"type":"DBL"},{"adults":1,"type":"\u0053GL"}]},"property_id":"P"}`,
		}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			first := ktDerive(t, spec, nil, g.bodies[0])
			for _, b := range g.bodies[1:] {
				d := ktDerive(t, spec, nil, b)
				if d.Key != first.Key || d.Canonical != first.Canonical {
					t.Errorf("key differs:\n%s\n  %s %s\n%s\n  %s %s", g.bodies[0], first.Key, first.Canonical, b, d.Key, d.Canonical)
				}
				if d.PayloadHash != first.PayloadHash {
					t.Errorf("payload hash differs:\n%s\n%s", g.bodies[0], b)
				}
			}
		})
	}
}

// TestDerive_PayloadHashOfHeldIntegers: an integer past 2^53 that float64 holds
// exactly (2^60, 10^21) reads the same however it is spelt, so its body's payload hash
// is RFC 8785's whatever the spelling: a redelivery that respells it is no mismatch.
func TestDerive_PayloadHashOfHeldIntegers(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/booking_id"}}
	for _, g := range []struct{ name, a, b string }{
		{"2^60", `{"booking_id":"B","total":1152921504606846976}`, `{"booking_id":"B","total":1152921504606846976.0}`},
		{"-2^60", `{"booking_id":"B","total":-1152921504606846976}`, `{"booking_id":"B","total":-1.152921504606846976e18}`},
		{"10^21", `{"booking_id":"B","total":1000000000000000000000}`, `{"booking_id":"B","total":1e21}`},
		{"10^21 nested", `{"booking_id":"B","x":[{"y":1000000000000000000000}]}`, `{"booking_id":"B","x":[{"y":1E+21}]}`},
	} {
		t.Run(g.name, func(t *testing.T) {
			a, b := ktDerive(t, spec, nil, g.a), ktDerive(t, spec, nil, g.b)
			if want := ktSHA256(string(mustJCS(t, g.a))); a.PayloadHash != want {
				t.Errorf("payload hash of %s is not RFC 8785's", g.a)
			}
			if a.PayloadHash != b.PayloadHash {
				t.Errorf("payload hash differs for one integer spelt two ways:\n%s %s\n%s %s", g.a, a.PayloadHash, g.b, b.PayloadHash)
			}
		})
	}
}

// TestDerive_DifferentKey lists pairs that must not share a key, and one
// that shares the key but not the payload hash.
func TestDerive_DifferentKey(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/booking_id", "/stay"}}
	pairs := []struct{ name, a, b string }{
		{"value", `{"booking_id":"B-1"}`, `{"booking_id":"B-2"}`},
		{"string vs number", `{"booking_id":"1"}`, `{"booking_id":1}`},
		{"array order", `{"booking_id":"B","stay":[1,2]}`, `{"booking_id":"B","stay":[2,1]}`},
		{"nested value", `{"booking_id":"B","stay":{"n":1}}`, `{"booking_id":"B","stay":{"n":2}}`},
		{"field moved", `{"booking_id":"B","stay":"x"}`, `{"booking_id":"x","stay":"B"}`},
		{"case", `{"booking_id":"b"}`, `{"booking_id":"B"}`},
		// RFC 8785 does not normalise Unicode: precomposed é is not e + U+0301.
		{"unicode normal form", `{"booking_id":"\u00e9"}`, `{"booking_id":"e\u0301"}`},
		{"empty string vs absent", `{"booking_id":"B","stay":""}`, `{"booking_id":"B"}`},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, b := ktDerive(t, spec, nil, p.a), ktDerive(t, spec, nil, p.b)
			if a.Key == b.Key {
				t.Errorf("same key %s for %s and %s", a.Key, p.a, p.b)
			}
		})
	}

	t.Run("non-key field", func(t *testing.T) {
		a := ktDerive(t, spec, nil, `{"booking_id":"B","sent_at":"09:00"}`)
		b := ktDerive(t, spec, nil, `{"booking_id":"B","sent_at":"09:05"}`)
		if a.Key != b.Key {
			t.Errorf("key changed with a field outside key_fields")
		}
		if a.PayloadHash == b.PayloadHash {
			t.Errorf("payload hash did not change with the content")
		}
	})

	// RFC 8785 rounds both to 9007199254740992: the payload hash keeps the digits of an
	// integer that float64 cannot hold, and hashes any other number as RFC 8785 spells it.
	t.Run("integer float64 cannot hold", func(t *testing.T) {
		a := ktDerive(t, spec, nil, `{"booking_id":"B","seq":9007199254740993}`)
		b := ktDerive(t, spec, nil, `{"booking_id":"B","seq":9007199254740992}`)
		if a.Key != b.Key {
			t.Errorf("key changed with a field outside key_fields")
		}
		if a.PayloadHash == b.PayloadHash {
			t.Errorf("payload hash did not change with the integer's last digit")
		}
		if want := keySHA256Hex([]byte(`{"booking_id":"B","seq":9007199254740993}`)); a.PayloadHash != want {
			t.Errorf("payload hash %s, want that of the digits as sent, %s", a.PayloadHash, want)
		}
		if want := keySHA256Hex([]byte(`{"booking_id":"B","seq":9007199254740992}`)); b.PayloadHash != want {
			t.Errorf("payload hash %s, want RFC 8785's %s", b.PayloadHash, want)
		}
	})

	// An explicit null and an absent field both enter the hash as null.
	t.Run("null is absent", func(t *testing.T) {
		a := ktDerive(t, spec, nil, `{"booking_id":"B","stay":null}`)
		b := ktDerive(t, spec, nil, `{"booking_id":"B"}`)
		if a.Key != b.Key {
			t.Errorf("null and absent give different keys")
		}
		if a.Fields[1] != (storage.Field{Pointer: "/stay", Present: false, Value: "null"}) {
			t.Errorf("Fields[1] = %+v", a.Fields[1])
		}
	})
}

// TestDerive_PointerSpelling: pointers are member names of the canonical
// object, so they are escaped and ordered as RFC 8785 says. U+1F600 sorts
// before U+FB01 in UTF-16 code units (0xD83D < 0xFB01) but after it in
// UTF-8 bytes, so this also shows that the order is RFC 8785's.
func TestDerive_PointerSpelling(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/\ufb01", "/café", `/k"l`, "/a~1b", "/\U0001F600"}}
	d := ktDerive(t, spec, nil, `{"café":1,"k\"l":2,"a/b":3,"\ufb01":4,"😀":5}`)
	const want = `{"/a~1b":3,"/café":1,"/k\"l":2,"/😀":5,"/ﬁ":4}`
	if d.Canonical != want {
		t.Errorf("Canonical = %s, want %s", d.Canonical, want)
	}
}

func TestDerive_MissingFields(t *testing.T) {
	spec := KeySpec{KeyFields: ktOTAFields}
	d := ktDerive(t, spec, nil, `{"booking_id":"BK-1","status":null,"extra":{"property_id":"P"}}`)
	want := []storage.Field{
		{Pointer: "/property_id", Present: false, Value: "null"},
		{Pointer: "/booking_id", Present: true, Value: `"BK-1"`},
		{Pointer: "/status", Present: false, Value: "null"},
		{Pointer: "/effective_date", Present: false, Value: "null"},
	}
	if !reflect.DeepEqual(d.Fields, want) {
		t.Errorf("Fields = %+v\nwant %+v", d.Fields, want)
	}
	const canonical = `{"/booking_id":"BK-1","/effective_date":null,"/property_id":null,"/status":null}`
	if d.Canonical != canonical || d.Key != "derived:"+ktSHA256(canonical) {
		t.Errorf("Canonical = %s, Key = %s", d.Canonical, d.Key)
	}
}

func TestDerive_NoKey(t *testing.T) {
	tests := []struct {
		name string
		spec KeySpec
		h    http.Header
		body string
		want string // in the message
	}{
		{"all fields absent", KeySpec{KeyFields: ktOTAFields}, nil, `{"other":1}`,
			`none of the key fields "/property_id", "/booking_id", "/status", "/effective_date" is present`},
		{"all fields null", KeySpec{KeyFields: []string{"/a", "/b"}}, nil, `{"a":null,"b":null}`, `"/a", "/b"`},
		{"empty object", KeySpec{KeyFields: []string{"/a"}}, nil, `{}`, `"/a"`},
		// A key of empty values is as much a key of nothing as one of nulls: every such
		// event would be a duplicate of the first, silently.
		{"all fields empty", KeySpec{KeyFields: []string{"/a", "/b", "/c", "/d"}}, nil, `{"a":"","b":{},"c":[],"d":" \t"}`,
			`none of the key fields "/a", "/b", "/c", "/d" holds a value`},
		{"fields empty or absent", KeySpec{KeyFields: []string{"/a", "/b"}}, nil, `{"a":""}`, `holds a value`},
		{"id absent, fields empty", KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/a"}}, nil, `{"a":""}`,
			`event id "/id" is absent, and none of the key fields "/a" holds a value`},
		{"top-level scalar", KeySpec{KeyFields: []string{"/a"}}, nil, `"a"`, `"/a"`},
		{"top-level array", KeySpec{KeyFields: []string{"/a"}}, nil, `[{"a":1}]`, `"/a"`},
		{"id absent, no fields", KeySpec{EventID: []string{"/id"}}, nil, `{"a":1}`,
			`event id "/id" is absent, and no key_fields are configured`},
		{"id unusable, fields absent", KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/a"}}, nil, `{"id":true}`,
			`event id "/id" is a boolean, and none of the key fields "/a" is present`},
		{"header absent, no fields", KeySpec{EventID: []string{"header:Webhook-Id"}}, http.Header{}, `{}`,
			`header Webhook-Id is absent`},
		// Read from the other family's header, which is named as its sender documents it:
		// Shopify's Events spell Shopify-Webhook-Id so, Svix svix-id in lower case.
		{"Shopify Events id absent", KeySpec{EventID: []string{"header:X-Shopify-Webhook-Id"}, Scheme: "shopify"},
			http.Header{"Shopify-Hmac-Sha256": {"x"}}, `{}`, `header Shopify-Webhook-Id is absent`},
		{"Svix id absent", KeySpec{EventID: []string{"header:webhook-id"}, Scheme: "standard-webhooks"},
			http.Header{"Svix-Timestamp": {"1"}, "Svix-Signature": {"v1,x"}}, `{}`, `header svix-id is absent`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Derive(tt.spec, tt.h, []byte(tt.body))
			if !errors.Is(err, ErrNoKey) || errors.Is(err, ErrNotJSON) {
				t.Fatalf("err = %v, want ErrNoKey", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
			if d.Key != "" || d.Method != "" {
				t.Errorf("Key = %q, Method = %q on ErrNoKey", d.Key, d.Method)
			}
			if want := ktSHA256(string(mustJCS(t, tt.body))); d.PayloadHash != want {
				t.Errorf("PayloadHash = %q, want %q (kept for the rejected delivery)", d.PayloadHash, want)
			}
			if len(d.Fields) != len(tt.spec.KeyFields) {
				t.Errorf("Fields = %+v, want one per key field", d.Fields)
			}
		})
	}
}

func mustJCS(t *testing.T, s string) []byte {
	t.Helper()
	b, err := jcs.Transform([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDerive_EventID(t *testing.T) {
	fields := []string{"/booking_id"}
	byPointer := KeySpec{EventID: []string{"/event_id"}, KeyFields: fields}
	long := strings.Repeat("x", 512)
	tests := []struct {
		name string
		spec KeySpec
		h    http.Header
		body string
		want string // "" means: falls back to the key derived from fields
	}{
		{"string", byPointer, nil, `{"event_id":"evt_1","booking_id":"B"}`, "evt_1"},
		{"string with escapes", byPointer, nil, `{"event_id":"\u0065vt_\u00e9\/1\"q"}`, `evt_é/1"q`},
		{"nested pointer", KeySpec{EventID: []string{"/data/id"}}, nil, `{"data":{"id":"in_1"}}`, "in_1"},
		{"array index", KeySpec{EventID: []string{"/events/1/id"}}, nil, `{"events":[{"id":"a"},{"id":"b"}]}`, "b"},
		{"escaped pointer", KeySpec{EventID: []string{"/a~1b/c~0d"}}, nil, `{"a/b":{"c~d":"x"}}`, "x"},
		{"integer", byPointer, nil, `{"event_id":42}`, "42"},
		{"integer spelled 42.0", byPointer, nil, `{"event_id":42.0}`, "42"},
		{"integer spelled 4.2e1", byPointer, nil, `{"event_id":4.2e1}`, "42"},
		{"negative integer", byPointer, nil, `{"event_id":-7}`, "-7"},
		{"largest safe integer", byPointer, nil, `{"event_id":9007199254740991}`, "9007199254740991"},
		{"big integer kept digit for digit", byPointer, nil, `{"event_id":9007199254740993}`, "9007199254740993"},
		{"big integer neighbour", byPointer, nil, `{"event_id": 9007199254740992}`, "9007199254740992"},
		{"64-bit integer", byPointer, nil, `{"event_id":-12345678901234567891}`, "-12345678901234567891"},
		{"512 bytes", byPointer, nil, `{"event_id":"` + long + `"}`, long},
		{"header", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields},
			http.Header{"Webhook-Id": {"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"}}, `{"event_id":"ignored"}`, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"},
		{"header name in any case", KeySpec{EventID: []string{"header:WEBHOOK-id"}},
			http.Header{"Webhook-Id": {"msg_1"}}, `{}`, "msg_1"},
		{"header map not canonicalised", KeySpec{EventID: []string{"header:Webhook-Id"}},
			http.Header{"webhook-id": {"msg_1"}}, `{}`, "msg_1"},
		{"first of several header values", KeySpec{EventID: []string{"header:X-Event-Id"}},
			http.Header{"X-Event-Id": {"a", "b"}}, `{}`, "a"},

		// Each of these falls back to the key fields.
		{"absent", byPointer, nil, `{"booking_id":"B"}`, ""},
		{"null", byPointer, nil, `{"event_id":null,"booking_id":"B"}`, ""},
		{"empty string", byPointer, nil, `{"event_id":"","booking_id":"B"}`, ""},
		{"spaces alone", byPointer, nil, `{"event_id":"   ","booking_id":"B"}`, ""},
		{"object", byPointer, nil, `{"event_id":{"id":1},"booking_id":"B"}`, ""},
		{"array", byPointer, nil, `{"event_id":["e"],"booking_id":"B"}`, ""},
		{"boolean", byPointer, nil, `{"event_id":true,"booking_id":"B"}`, ""},
		{"fraction", byPointer, nil, `{"event_id":1.5,"booking_id":"B"}`, ""},
		{"big integer in exponent form", byPointer, nil, `{"event_id":1e20,"booking_id":"B"}`, ""},
		{"513 bytes", byPointer, nil, `{"event_id":"` + long + `x","booking_id":"B"}`, ""},
		{"control character", byPointer, nil, `{"event_id":"a\nb","booking_id":"B"}`, ""},
		{"derived: prefix", byPointer, nil, `{"event_id":"derived:abc","booking_id":"B"}`, ""},
		{"pointer into a scalar", KeySpec{EventID: []string{"/event_id/x"}, KeyFields: fields}, nil, `{"event_id":"e","booking_id":"B"}`, ""},
		{"header absent", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields}, http.Header{"Other": {"x"}}, `{"booking_id":"B"}`, ""},
		{"header empty", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields}, http.Header{"Webhook-Id": {""}}, `{"booking_id":"B"}`, ""},
		{"nil headers", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields}, nil, `{"booking_id":"B"}`, ""},
		{"header not UTF-8", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields}, http.Header{"Webhook-Id": {"\xff"}}, `{"booking_id":"B"}`, ""},
		{"header too long", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: fields}, http.Header{"Webhook-Id": {long + "x"}}, `{"booking_id":"B"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ktDerive(t, tt.spec, tt.h, tt.body)
			// RFC 8785's form, but for an integer past 2^53, which keeps its digits.
			hashed := map[string]string{
				"big integer kept digit for digit": `{"event_id":9007199254740993}`,
				"64-bit integer":                   `{"event_id":-12345678901234567891}`,
			}[tt.name]
			if hashed == "" {
				hashed = string(mustJCS(t, tt.body))
			}
			if want := ktSHA256(hashed); d.PayloadHash != want {
				t.Errorf("PayloadHash = %s, want %s", d.PayloadHash, want)
			}
			if tt.want == "" {
				want := ktDerive(t, KeySpec{KeyFields: tt.spec.KeyFields}, nil, tt.body)
				if d.Method != storage.MethodDerived || d.Key != want.Key || d.EventIDFrom != "" {
					t.Errorf("got %s key %q, want the derived key %q", d.Method, d.Key, want.Key)
				}
				return
			}
			if d.Method != storage.MethodEventID || d.Key != tt.want || !slices.Contains(tt.spec.EventID, d.EventIDFrom) {
				t.Errorf("got %s key %q from %q, want event id %q from %q", d.Method, d.Key, d.EventIDFrom, tt.want, tt.spec.EventID)
			}
			if d.Fields != nil || d.Canonical != "" || d.Hash != "" {
				t.Errorf("derivation fields set for an event id: %+v", d)
			}
		})
	}
}

// TestDerive_NotJSON checks each way a body can fail, with the reason the
// provider reads in the 400. It also pins the wording of jsontext's messages.
func TestDerive_NotJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct{ name, body, want string }{
		{"empty", ``, "empty body"},
		{"only whitespace", " \n\t", "empty body"},
		{"not JSON", `booking cancelled`, `invalid character 'b' at start of value`},
		{"form encoded", `a=1&b=2`, `invalid character 'a' at start of value`},
		{"trailing garbage", `{"a":1} x`, "more data after the JSON value at byte 8"},
		{"two documents", `{"a":1}{"a":2}`, "more data after the JSON value at byte 7"},
		{"truncated", `{"a":`, "unexpected end of body"},
		{"unclosed array", `[1,2`, "unexpected end of body"},
		{"trailing comma", `[1,]`, `invalid character ']' at start of value within "/1" at byte 3`},
		{"missing colon", `{"a" 1}`, `invalid character '1' after object name (expecting ':') within "/a" at byte 5`},
		{"single quotes", `{'a':1}`, `invalid character '\'' at start of string (expecting '"') at byte 1`},
		{"leading zero", `{"a":01}`, `invalid character '1' after object value (expecting ',' or '}') at byte 6`},
		{"NaN", `{"a":NaN}`, `invalid character 'N' at start of value within "/a" at byte 5`},
		{"invalid UTF-8 in a string", "{\"a\":\"caf\xe9\"}", "invalid UTF-8 at byte 9"},
		{"invalid UTF-8 outside a string", "\xff", "invalid UTF-8 at byte 0"},
		{"overlong UTF-8", "[\"\xc0\xaf\"]", "invalid UTF-8 at byte 2"},
		{"UTF-8 surrogate", "[\"\xed\xa0\x80\"]", "invalid UTF-8 at byte 2"},
		{"byte-order mark", "\xef\xbb\xbf{}", "byte-order mark"},
		// JSON in UTF-16 or UTF-32, as a .NET or Java sender may write it: told by its
		// byte-order mark, or by the NULs around its first characters (RFC 4627, 3).
		{"UTF-16LE with a byte-order mark", "\xff\xfe{\x00}\x00", "body is UTF-16 (little-endian), not UTF-8"},
		{"UTF-16BE with a byte-order mark", "\xfe\xff\x00{\x00}", "body is UTF-16 (big-endian), not UTF-8"},
		{"UTF-16LE", "{\x00\"\x00a\x00\"\x00:\x001\x00}\x00", "body is UTF-16 (little-endian), not UTF-8"},
		{"UTF-16BE", "\x00{\x00\"\x00a\x00\"\x00:\x001\x00}", "body is UTF-16 (big-endian), not UTF-8"},
		{"UTF-32LE", "{\x00\x00\x00}\x00\x00\x00", "body is UTF-32 (little-endian), not UTF-8"},
		{"UTF-32BE", "\x00\x00\x00{\x00\x00\x00}", "body is UTF-32 (big-endian), not UTF-8"},
		{"UTF-32LE with a byte-order mark", "\xff\xfe\x00\x00{\x00\x00\x00", "body is UTF-32 (little-endian), not UTF-8"},
		{"non-ASCII outside a string", "[1,\u00a0 2]", `invalid character '\u00a0' at start of value within "/1" at byte 3`},
		{"control character in a string", "[\"a\tb\"]", `invalid character '\t' in string (expecting non-control character) within "/0" at byte 3`},
		{"bad escape", `["\x41"]`, "invalid escape sequence `\\x` in string within \"/0\" at byte 2"},
		{"bad \\u escape", `["\u12zz"]`, "invalid escape sequence `\\u12zz` in string"},
		{"lone surrogate beside a duplicate name", `{"a":"\ud800","a":1}`, "duplicate object member name"},
		{"lone surrogate beside a bad escape", `["\udc00","\x41"]`, "invalid escape sequence `\\x` in string within \"/1\" at byte 11"},
		{"too deep", deep(65), "nested deeper than 64 levels at byte 64"},
		{"too deep in objects", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), "nested deeper than 64 levels"},
		{"number too large", `{"amount":1e400}`, `number outside the float64 range: "1e400" at byte 10`},
		{"number too small", `{"amount":-1.8e308}`, `number outside the float64 range: "-1.8e308"`},
		{"duplicate member", `{"booking_id":"B-1","booking_id":"B-2"}`, `duplicate object member name "booking_id" at byte 20`},
		{"duplicate nested member", `{"a":{"status":1,"x":0,"status":1}}`, `duplicate object member name "status"`},
		{"duplicate spelled differently", `{"id":1,"\u0069d":2}`, `duplicate object member name "id"`},
	}
	specs := []KeySpec{
		{KeyFields: []string{"/a"}},
		{EventID: []string{"header:Webhook-Id"}}, // the body is checked even when the id is not in it
	}
	h := http.Header{"Webhook-Id": {"msg_1"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, spec := range specs {
				d, err := Derive(spec, h, []byte(tt.body))
				if !errors.Is(err, ErrNotJSON) || errors.Is(err, ErrNoKey) {
					t.Fatalf("Derive(%q) err = %v, want ErrNotJSON", tt.body, err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %q, want it to contain %q", err, tt.want)
				}
				if !reflect.DeepEqual(d, storage.Derivation{}) {
					t.Errorf("Derivation = %+v, want zero", d)
				}
			}
		})
	}
}

// TestDerive_LoneSurrogates: RFC 8259 lets a string hold an escaped surrogate that is no
// half of a pair, and the serialisers of .NET, Node and Python write one for text cut in
// the middle of an emoji. Such a body is taken in, and the surrogate keeps its identity in
// the canonical body, the payload hash and the key fields: texts that differ only in it
// are told apart, from each other and from U+FFFD, however the escape is spelt.
func TestDerive_LoneSurrogates(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/a"}}
	derive := func(body string) storage.Derivation {
		t.Helper()
		d, err := Derive(spec, nil, []byte(body))
		if err != nil {
			t.Fatalf("Derive(%s): %v, want it taken in", body, err)
		}
		return d
	}
	for _, tt := range []struct{ body, canonical string }{
		{`{"a":"Merci \ud83d"}`, `{"a":"Merci \ud83d"}`},
		{`{"a":"Merci \uD83D"}`, `{"a":"Merci \ud83d"}`},
		{`{"a":"\udc00x"}`, `{"a":"\udc00x"}`},
		{`{"a":"\ude00\ud83d"}`, `{"a":"\ude00\ud83d"}`},
		{`{"a":"\ud83d\ud83d\ude00"}`, `{"a":"\ud83d😀"}`},
		{`{"a":"\ud83d\u0041\u0001"}`, `{"a":"\ud83dA\u0001"}`},
		{`{"b":1,"a":"\ud800"}`, `{"a":"\ud800","b":1}`},
		// Names: apart from each other, in UTF-16 order (a lone surrogate sorts where
		// its code unit does, a pair's character after its high half alone).
		{`{"a":0,"\ud83e":1,"\ud83d":2}`, `{"a":0,"\ud83d":2,"\ud83e":1}`},
		{`{"a":0,"\ue000":1,"😀":2,"\ud83d":3,"\ud800":4,"\ud7ff":5}`, `{"a":0,"` + "\ud7ff" + `":5,"\ud800":4,"\ud83d":3,"😀":2,"` + "\ue000" + `":1}`},
	} {
		d, err := Derive(spec, nil, []byte(tt.body))
		if err != nil {
			t.Errorf("Derive(%s): %v, want it taken in", tt.body, err)
			continue
		}
		if doc, _, _ := canonicalBody([]byte(tt.body)); doc != tt.canonical {
			t.Errorf("canonical form of %s = %s, want %s", tt.body, doc, tt.canonical)
		}
		if d.PayloadHash != ktSHA256(tt.canonical) {
			t.Errorf("payload hash of %s is not that of %s", tt.body, tt.canonical)
		}
	}
	// Key fields and payloads that differ only in a lone surrogate, or in it against
	// U+FFFD or against an escaped backslash, are apart.
	apart := []string{`{"a":"x\ud83d"}`, `{"a":"x\ud83e"}`, `{"a":"x\udc00"}`, `{"a":"x\ufffd"}`, `{"a":"x\\ud83d"}`, `{"a":"x"}`}
	seen := map[string]string{}
	for _, body := range apart {
		d := derive(body)
		if other, ok := seen[d.Key]; ok {
			t.Errorf("%s and %s share the key %s", body, other, d.Key)
		}
		if other, ok := seen[d.PayloadHash]; ok {
			t.Errorf("%s and %s share the payload hash", body, other)
		}
		seen[d.Key], seen[d.PayloadHash] = body, body
	}
	// Two names alike once read are still one name twice.
	for _, body := range []string{`{"a":1,"\ud83d":1,"\ud83d":2}`, `{"a":1,"\ud83d":1,"\uD83D":2}`} {
		if _, err := Derive(spec, nil, []byte(body)); !errors.Is(err, ErrNotJSON) || !strings.Contains(err.Error(), "duplicate") {
			t.Errorf("Derive(%s): %v, want a duplicate name refused", body, err)
		}
	}
	// Raw bytes of a surrogate are not UTF-8, and stay refused.
	if _, err := Derive(spec, nil, []byte("{\"a\":\"\xed\xa0\xbd\"}")); !errors.Is(err, ErrNotJSON) {
		t.Errorf("a surrogate's bytes in UTF-8: %v, want ErrNotJSON", err)
	}
	// An event id that holds one would be read as U+FFFD, its key shared with an id that
	// differs there: it is no event id, and the key falls back to the key fields.
	idSpec := KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/a"}}
	x, err := Derive(idSpec, nil, []byte(`{"id":"evt_\ud83d","a":1}`))
	if err != nil || x.Method != storage.MethodDerived {
		t.Fatalf("an event id with a lone surrogate: %+v, %v; want the key fields' key", x, err)
	}
	y, err := Derive(idSpec, nil, []byte(`{"id":"evt_\ud83e","a":2}`))
	if err != nil || y.Key == x.Key {
		t.Errorf("two events apart in their ids' lone surrogates and in their key fields share the key %s (%v)", x.Key, err)
	}
	if _, err := Derive(KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/b"}}, nil, []byte(`{"id":"evt_\udc00","a":1}`)); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "lone surrogate") {
		t.Errorf("with no key field present: %v, want ErrNoKey saying why the id is not one", err)
	}
}

// TestDerive_IntegerSpellings: a key field holds an integer by its value, however the
// sender spells it: 2^60 with ".0", 10^21 as 1e21, an integer past 2^53 in an exponent.
// Each group shares one key; no two groups do.
func TestDerive_IntegerSpellings(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/booking_id", "/total"}}
	big := "1" + strings.Repeat("0", 308)
	groups := [][]string{
		{"1152921504606846976", "1152921504606846976.0", "1.152921504606846976e18", "115292150460684697600e-2"},
		{"1000000000000000000000", "1e21", "1E+21", "10e20", "1.0e21", "0.001e24"},
		{"-1000000000000000000000", "-1e21", "-1.000e+21"},
		{"9007199254740993", "9007199254740993.0", "9.007199254740993e15", "90071992547409930e-1"},
		{"9007199254740992", "9007199254740992.000", "9.007199254740992E15"},
		{"12345678901234567", "12345678901234567.00"},
		{big, "1e308", "0.1e309"},
		{"42", "42.0", "4.2e1", "4200e-2"},
		{"0", "-0", "0.0", "-0e99999999", "0e-5", "1e-400"}, // 1e-400 reads as 0, as in RFC 8785
		{"0.5", "5e-1"},
	}
	group := map[string]string{} // key: the first spelling of its group
	for _, g := range groups {
		key := ""
		for _, n := range g {
			d := ktDerive(t, spec, nil, `{"booking_id":"B","total":`+n+`}`)
			switch {
			case key == "":
				key = d.Key
				if other, ok := group[key]; ok {
					t.Errorf("%s shares its key with %s", n, other)
				}
				group[key] = n
			case d.Key != key:
				t.Errorf("%s and %s: two keys for one value (%s)", g[0], n, d.Canonical)
			}
		}
	}
}

// TestDerive_LoneSurrogateBesideAnotherFault: a body refused for another fault (a number
// beyond float64) is refused for it with a lone surrogate beside it too, never taken in
// with the surrogate read as U+FFFD: two events would share a key.
func TestDerive_LoneSurrogateBesideAnotherFault(t *testing.T) {
	spec := KeySpec{KeyFields: []string{"/a", "/n"}}
	a := `{"a":"cut \ud83d","n":1e400}`
	b := `{"a":"cut \udc00","n":1e500}`
	for _, body := range []string{a, b} {
		if _, err := Derive(spec, http.Header{}, []byte(body)); !errors.Is(err, ErrNotJSON) ||
			!strings.Contains(err.Error(), "outside the float64 range") {
			t.Errorf("Derive(%s) = %v; want ErrNotJSON naming the number outside the float64 range", body, err)
		}
	}
	da, errA := Derive(spec, http.Header{}, []byte(a))
	db, errB := Derive(spec, http.Header{}, []byte(b))
	if errA == nil && errB == nil && da.Key == db.Key {
		t.Errorf("two different events share key %s (canonical %s)", da.Key, da.Canonical)
	}
	// Keyed on an event id, the lone surrogate (read as U+FFFD) is used as the id, which
	// the change refuses to do: the key of a plain, valid event whose id holds U+FFFD.
	ids := KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/a"}}
	plain, err := Derive(ids, http.Header{}, []byte(`{"id":"evt_\ufffd","a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Derive(ids, http.Header{}, []byte(`{"id":"evt_\ud83d","a":1,"n":1e400}`)); err == nil && d.Key == plain.Key {
		t.Errorf("event id evt_\\ud83d (next to 1e400) is keyed %q, the key of the event whose id is evt_\\ufffd", d.Key)
	}
}

// TestDerive_LoneSurrogateNamesErrors: lone surrogates in two names do not make the
// names one in the error of a body refused for something else: that is what it names.
func TestDerive_LoneSurrogateNamesErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"\ud83d":1,"\udc00":2,"b":tru}`, "in literal true"},
		{`{"x\ud83d":1,"x\ufffd":2,"b":tru}`, "in literal true"},
		{`{"\ud83d":1,"\udc00":2,"n":1e400}`, "outside the float64 range"},
	} {
		_, _, err := canonicalBody([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("canonicalBody(%s) = %v; want the error to name %q", c.body, err, c.want)
		}
	}
}

// TestDerive_NotJSONLongName: the reason quotes a duplicate member name and the object it
// is in, both the sender's to make as long as the body, so both are cut.
func TestDerive_NotJSONLongName(t *testing.T) {
	long := strings.Repeat("A", 10_000)
	body := `{"` + long + `":{"` + long + `":1,"` + long + `":2}}`
	_, err := Derive(KeySpec{KeyFields: []string{"/a"}}, nil, []byte(body))
	if !errors.Is(err, ErrNotJSON) {
		t.Fatalf("err = %v, want ErrNotJSON", err)
	}
	msg := err.Error()
	if len(msg) > 256 || !strings.Contains(msg, `duplicate object member name "AAAA`) ||
		!strings.Contains(msg, `…" within "/AAAA`) || !strings.Contains(msg, " at byte ") {
		t.Errorf("err of %d bytes: %.300s", len(msg), msg)
	}
}

// TestDerive_Accepts covers bodies near the edges of what is refused.
func TestDerive_Accepts(t *testing.T) {
	spec := KeySpec{EventID: []string{"header:Webhook-Id"}}
	h := http.Header{"Webhook-Id": {"msg_1"}}
	for name, body := range map[string]string{
		"64 levels":                  strings.Repeat("[", 64) + strings.Repeat("]", 64),
		"brackets inside strings":    `{"a":"` + strings.Repeat("[{", 100) + `\"` + strings.Repeat("[", 100) + `"}`,
		"top-level string":           `"just a string"`,
		"top-level number":           ` 42 `,
		"top-level null":             `null`,
		"largest float64":            `[1.7976931348623157e308, -1.7976931348623157e308]`,
		"underflow rounds to zero":   `[1e-400]`,
		"U+FFFD is valid UTF-8":      "[\"\xef\xbf\xbd\"]",
		"control characters escaped": `["\u0000\u001f"]`,
		"empty member name":          `{"":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Derive(spec, h, []byte(body)); err != nil {
				t.Errorf("Derive(%.60q): %v", body, err)
			}
		})
	}
}

// TestDerive_PureFunction: the key depends on the delivery alone. No clock
// and no source go in (sources scope keys where they are stored), so two
// receipts of one delivery, at any time and under any source, agree.
func TestDerive_PureFunction(t *testing.T) {
	for _, spec := range []KeySpec{
		{KeyFields: ktOTAFields},
		{EventID: []string{"/event_id"}},
		{EventID: []string{"header:Webhook-Id"}, KeyFields: ktOTAFields},
	} {
		h := http.Header{"Webhook-Id": {"msg_1"}}
		a := ktDerive(t, spec, h, ktCancellation)
		b := ktDerive(t, spec, h.Clone(), ktCancellation)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%+v: two derivations differ:\n%+v\n%+v", spec, a, b)
		}
	}
}

func TestDerive_InvalidSpec(t *testing.T) {
	_, err := Derive(KeySpec{KeyFields: []string{"booking_id"}}, nil, []byte(`{"booking_id":1}`))
	if err == nil || errors.Is(err, ErrNotJSON) || errors.Is(err, ErrNoKey) {
		t.Fatalf("err = %v, want a spec error", err)
	}
	if !strings.Contains(err.Error(), `key_fields[0] "booking_id" is not a JSON pointer`) {
		t.Errorf("err = %q", err)
	}
}

func TestKeySpec_Validate(t *testing.T) {
	tests := []struct {
		name string
		spec KeySpec
		want []string // each in the message; none means valid
	}{
		{"event id pointer", KeySpec{EventID: []string{"/event_id"}}, nil},
		{"nested pointer", KeySpec{EventID: []string{"/data/id"}}, nil},
		{"header", KeySpec{EventID: []string{"header:Webhook-Id"}}, nil},
		{"key fields", KeySpec{KeyFields: ktOTAFields}, nil},
		{"both", KeySpec{EventID: []string{"header:X-Event-Id"}, KeyFields: []string{"/a"}}, nil},
		{"escapes", KeySpec{KeyFields: []string{"/a~1b", "/m~0n", "/~01"}}, nil},
		{"member named empty", KeySpec{EventID: []string{"/"}, KeyFields: []string{"//x"}}, nil},
		{"non-ASCII", KeySpec{KeyFields: []string{"/café", `/"q"`}}, nil},

		{"neither", KeySpec{}, []string{"set event_id or key_fields"}},
		{"empty key_fields", KeySpec{KeyFields: []string{}}, []string{"set event_id or key_fields"}},
		{"event id without slash", KeySpec{EventID: []string{"data/id"}},
			[]string{`event_id "data/id" is not a JSON pointer (must start with "/")`}},
		{"header without name", KeySpec{EventID: []string{"header:"}}, []string{`event_id "header:" names no header`}},
		{"header with space", KeySpec{EventID: []string{"header: Webhook-Id"}},
			[]string{`event_id "header: Webhook-Id": " Webhook-Id" is not a valid header name`}},
		{"header with colon", KeySpec{EventID: []string{"header:A:B"}}, []string{`"A:B" is not a valid header name`}},
		{"bad escape", KeySpec{KeyFields: []string{"/a", "/b", "/c~2d"}},
			[]string{`key_fields[2] "/c~2d" is not a JSON pointer ("~" must be followed by 0 or 1)`}},
		{"trailing tilde", KeySpec{EventID: []string{"/a~"}}, []string{`event_id "/a~" is not a JSON pointer ("~" must be followed by 0 or 1)`}},
		{"whole body", KeySpec{KeyFields: []string{""}}, []string{`key_fields[0] "" is the whole body`}},
		{"header as key field", KeySpec{KeyFields: []string{"header:X-Id"}},
			[]string{`key_fields[0] "header:X-Id": only event_id may name a header`}},
		{"repeat", KeySpec{KeyFields: []string{"/a", "/b", "/a"}}, []string{`key_fields[2] "/a" repeats key_fields[0]`}},
		{"not UTF-8", KeySpec{KeyFields: []string{"/\xff"}}, []string{`key_fields[0] "/\xff" is not valid UTF-8`}},
		{"qualified place", KeySpec{EventID: []string{"/id when /type = a|b", "header:X-Id when /kind = c"}}, nil},
		{"qualifier without values", KeySpec{EventID: []string{"/id when /type"}},
			[]string{`event_id "/id when /type": write the qualifier as "when POINTER = VALUE|VALUE"`}},
		{"qualifier on a header", KeySpec{EventID: []string{"/id when header:X-Type = a"}},
			[]string{`the qualifier's "header:X-Type" is not a JSON pointer to a field of the event`}},
		{"qualifier not a pointer", KeySpec{EventID: []string{"/id when type = a"}},
			[]string{`the qualifier's "type" is not a JSON pointer`}},
		{"qualifier with an empty value", KeySpec{EventID: []string{"/id when /type = a||b"}},
			[]string{"the qualifier names an empty value"}},
		{"qualified place not a pointer", KeySpec{EventID: []string{"id when /type = a"}},
			[]string{`event_id "id" is not a JSON pointer`}},
		{"every problem at once", KeySpec{EventID: []string{"id"}, KeyFields: []string{"a", "/b", "/b"}}, []string{
			`event_id "id" is not a JSON pointer`,
			`key_fields[0] "a" is not a JSON pointer`,
			`key_fields[2] "/b" repeats key_fields[1]`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestPointer checks RFC 6901's own examples (§5), against the document as
// written (whitespace, escaped names) and in canonical form.
func TestPointer(t *testing.T) {
	const raw = `{
      "foo": ["bar", "baz"],
      "": 0,
      "a/b": 1,
      "c%d": 2,
      "e^f": 3,
      "g|h": 4,
      "i\\j": 5,
      "k\"l": 6,
      " ": 7,
      "m~n": 8,
      "\u006e\/o": {"deep": [[], [null, {"x": "y"}]]}
   }`
	canonical := string(mustJCS(t, raw))
	tests := []struct {
		pointer    string
		raw, canon string // "" means absent
	}{
		{"", raw, canonical},
		{"/foo", `["bar", "baz"]`, `["bar","baz"]`},
		{"/foo/0", `"bar"`, `"bar"`},
		{"/foo/1", `"baz"`, `"baz"`},
		{"/", "0", "0"},
		{"/a~1b", "1", "1"},
		{"/c%d", "2", "2"},
		{"/e^f", "3", "3"},
		{"/g|h", "4", "4"},
		{`/i\j`, "5", "5"},
		{`/k"l`, "6", "6"},
		{"/ ", "7", "7"},
		{"/m~0n", "8", "8"},
		{"/n~1o/deep/1/1/x", `"y"`, `"y"`},
		{"/n~1o/deep/1/0", "null", "null"},
		{"/n~1o/deep/0", "[]", "[]"},
		{"/n~1o", `{"deep": [[], [null, {"x": "y"}]]}`, `{"deep":[[],[null,{"x":"y"}]]}`},

		{"/foo/2", "", ""},
		{"/foo/-", "", ""},
		{"/foo/01", "", ""},
		{"/foo/+1", "", ""},
		{"/foo/1e0", "", ""},
		{"/foo/99999999999", "", ""},
		{"/foo/0/x", "", ""},
		{"/a/b", "", ""},
		{"/nope", "", ""},
		{"/n~1o/deep/0/0", "", ""},
		{"//", "", ""},
	}
	for _, tt := range tests {
		for _, c := range []struct{ doc, want string }{{raw, tt.raw}, {canonical, tt.canon}} {
			got, ok := ptrLookup(c.doc, tt.pointer)
			if ok != (c.want != "") || got != c.want {
				t.Errorf("ptrLookup(%.20q…, %q) = %q, %v; want %q", c.doc, tt.pointer, got, ok, c.want)
			}
		}
	}
}

// FuzzDerive checks that Derive never panics, never accepts a body that is
// not JSON, and gives a body the same key and payload hash however it is
// re-encoded: members reordered, whitespace changed, strings re-escaped.
func FuzzDerive(f *testing.F) {
	for _, s := range []string{
		ktCancellation,
		`{"id":"evt_1","a":1,"b":[1,2]}`,
		`{"id":42.0,"a":{"y":1,"x":2}}`,
		`{"id":9007199254740993,"a":null}`,
		`{"a":"H\u00f4tel \ud83d\ude00","b":[1e2,-0,0.5]}`,
		`{"id":"evt_\ud83d","a":"cut \udc00","b":{"\ud83e":1,"\ud83d":2}}`,
		`{"c/d":{"":"x"},"a":true}`,
		`[{"a":1}]`,
		`"top"`,
		`{"a":1,"a":2}`,
	} {
		f.Add([]byte(s), "msg_1")
	}
	specs := []KeySpec{
		{EventID: []string{"/id"}, KeyFields: []string{"/a", "/b/0", "/c~1d/"}},
		{EventID: []string{"header:Webhook-Id"}, KeyFields: []string{"/a"}},
		{KeyFields: []string{"/a", "/b", "/0"}},
	}
	f.Fuzz(func(t *testing.T, body []byte, headerID string) {
		h := http.Header{"Webhook-Id": {headerID}}
		ktSameAsJCS(t, body)
		for _, spec := range specs {
			d, err := Derive(spec, h, body)
			if err != nil {
				if !errors.Is(err, ErrNotJSON) && !errors.Is(err, ErrNoKey) {
					t.Fatalf("Derive(%q): unexpected error %v", body, err)
				}
				continue
			}
			if !json.Valid(body) || !utf8.Valid(body) {
				t.Fatalf("Derive accepted a body that is not JSON: %q", body)
			}
			ktCheckDerivation(t, spec, body, d)

			agains := ktReencode(t, body)
			if loneSurrogateIn(body) {
				// encoding/json reads it as U+FFFD, which is another text.
				agains = agains[:1]
			}
			for _, again := range agains {
				d2, err := Derive(spec, h, again)
				if err != nil {
					t.Fatalf("re-encoded body refused: %v\n%q\n%q", err, body, again)
				}
				if d2.Key != d.Key || d2.PayloadHash != d.PayloadHash {
					t.Fatalf("re-encoding changed the key or payload hash:\n%q -> %s %s\n%q -> %s %s",
						body, d.Key, d.PayloadHash, again, d2.Key, d2.PayloadHash)
				}
			}
		}
	})
}

// ktCheckDerivation checks that a successful derivation is self-consistent.
func ktCheckDerivation(t *testing.T, spec KeySpec, body []byte, d storage.Derivation) {
	t.Helper()
	if d.Key == "" || len(d.PayloadHash) != 64 {
		t.Fatalf("incomplete derivation %+v", d)
	}
	switch d.Method {
	case storage.MethodEventID:
		if strings.HasPrefix(d.Key, "derived:") || len(d.Key) > 512 || !slices.Contains(spec.EventID, d.EventIDFrom) {
			t.Fatalf("bad event id derivation %+v", d)
		}
	case storage.MethodDerived:
		if d.Key != "derived:"+d.Hash || d.Hash != ktSHA256(d.Canonical) || len(d.Fields) != len(spec.KeyFields) {
			t.Fatalf("bad derived key %+v", d)
		}
		// RFC 8785 all through, but for an integer float64 cannot hold, which keeps its
		// digits (appendCanonicalExact): the exact writer must find it canonical, and
		// only such a number may set it apart from RFC 8785's.
		if loneSurrogateIn([]byte(d.Canonical)) {
			// Beyond RFC 8785, which refuses it: checkCanonical holds such a form.
			break
		}
		c, err := jcs.Transform([]byte(d.Canonical))
		if err != nil {
			t.Fatalf("Canonical %q is not JSON (%v)", d.Canonical, err)
		}
		if string(c) != d.Canonical {
			ex, ok := appendCanonicalExact(nil, []byte(d.Canonical))
			if !ok || string(ex) != d.Canonical || !mayBeRounded(d.Canonical) {
				t.Fatalf("Canonical %q is not canonical JSON: RFC 8785 says %q", d.Canonical, c)
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(d.Canonical), &m); err != nil || len(m) != len(spec.KeyFields) {
			t.Fatalf("Canonical %q is not one member per key field (%v)", d.Canonical, err)
		}
	default:
		t.Fatalf("Method = %q", d.Method)
	}
}

// ktSameAsJCS checks the canonicalisation against a second, independent RFC 8785
// implementation (gowebpki/jcs, which Derive used before jsontext): both accept the same
// bodies, apart from those refused before either parses (a byte-order mark, nesting
// deeper than 64), and write the same canonical bytes. Stored payload hashes and derived
// keys depend on those bytes.
func ktSameAsJCS(t *testing.T, body []byte) {
	t.Helper()
	if loneSurrogateIn(body) {
		return // beyond RFC 8785, which refuses it: checkCanonical holds such a body
	}
	doc, hash, err := canonicalBody(body)
	want, jerr := jcs.Transform(body)
	switch {
	case err != nil && precheckBody(body) != nil:
		return
	case (err == nil) != (jerr == nil):
		t.Fatalf("canonicalBody(%q): err %v, but jcs: err %v", body, err, jerr)
	case err == nil && doc != string(want):
		t.Fatalf("canonicalBody(%q) = %q, jcs says %q", body, doc, want)
	}
	// The hash is of jcs's form, but for the digits of integers float64 cannot hold.
	hashed := want
	if ex, ok := appendCanonicalValue(nil, body); ok {
		hashed = ex
	}
	if err == nil && hash != ktSHA256(string(hashed)) {
		t.Fatalf("canonicalBody(%q): hash %s, want that of %q", body, hash, hashed)
	}
}

// ktReencode returns body written out anew by encoding/json: compacted,
// and decoded (numbers kept as written) then indented, which sorts members
// and re-escapes strings.
func ktReencode(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		t.Fatalf("json.Compact: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v", err)
	}
	indented, err := json.MarshalIndent(v, "\t", "   ")
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return [][]byte{compact.Bytes(), indented}
}

func BenchmarkDerive(b *testing.B) {
	body := []byte(ktCancellation)
	h := http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Id":        {"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"},
		"Webhook-Timestamp": {"1710408413"},
		"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
	}
	for _, bm := range []struct {
		name string
		spec KeySpec
	}{
		{"EventIDPointer", KeySpec{EventID: []string{"/event_id"}, KeyFields: ktOTAFields}},
		{"EventIDHeader", KeySpec{EventID: []string{"header:Webhook-Id"}, KeyFields: ktOTAFields}},
		{"Derived4Fields", KeySpec{KeyFields: ktOTAFields}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Derive(bm.spec, h, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The floor: canonicalising the body, which every delivery needs for
	// its payload hash whatever its key.
	b.Run("CanonicalBodyOnly", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, _, err := canonicalBody(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestText(t *testing.T) {
	body := []byte(`{"property_id":"HTL-1","booking_id":12345,"status":"cancelled","refund":{"amount":182.50},"guest":{"name":"Ana"},"nil":null,` +
		`"padded":" HTL-2\t ","blank":"  "}`)
	// Intake reads its labels from the canonical body derive returns: the same text.
	_, doc, err := derive(KeySpec{KeyFields: []string{"/booking_id"}}, nil, body)
	if err != nil {
		t.Fatal(err)
	}
	for ptr, want := range map[string]string{
		"/property_id":   "HTL-1",
		"/booking_id":    "12345",
		"/refund/amount": "182.5",
		"/guest":         `{"name":"Ana"}`,
		"/nil":           "",
		"/padded":        "HTL-2", // as the console's filters take it typed
		"/blank":         "",
		"/missing":       "",
		"":               "",
		"not-a-pointer":  "",
	} {
		if got := Text(body, ptr); got != want {
			t.Errorf("Text(%q) = %q, want %q", ptr, got, want)
		}
		if got := textAt(doc, ptr); got != want {
			t.Errorf("textAt(%q) = %q, want %q", ptr, got, want)
		}
	}
	if got := Text([]byte(`{"a":1`), "/a"); got != "" {
		t.Errorf("Text of a body that is not JSON = %q, want \"\"", got)
	}
	// Cut to maxText, a label ends as it would have been stored whole: not in a blank.
	long := strings.Repeat("A", maxText-1) + " tail"
	if got := Text([]byte(`{"p":"`+long+`"}`), "/p"); got != strings.Repeat("A", maxText-1) {
		t.Errorf("Text of a long label = %q (%d bytes), want its first %d bytes without the blank", got, len(got), maxText-1)
	}
	if got := Text([]byte(`{"p":"HTL-2\r\n"}`), "/p"); got != "HTL-2" {
		t.Errorf("Text of a label ending in a line break = %q, want HTL-2: a browser's text box drops it", got)
	}
	// A blank other than a space, a tab or a line break is part of the label, as of a
	// typed filter.
	nbsp := "HTL-2\u00a0"
	if got := Text([]byte(`{"p":" `+nbsp+` "}`), "/p"); got != nbsp || storage.Label(" "+nbsp+"\t") != nbsp {
		t.Errorf("Text of a label ending in U+00A0 = %q, want %q as a filter typed for it is matched", got, nbsp)
	}
}

// TestDerive_EventIDPlaces: of several places for the event id, the first that holds a
// usable id gives the key, and the derivation names it; one that is absent or holds
// no usable id (null, a boolean) passes to the next, and with none usable the key is
// derived, the error of a delivery without key fields naming every place looked in.
func TestDerive_EventIDPlaces(t *testing.T) {
	spec := KeySpec{EventID: []string{"/payload/revision_id", "/payload/booking_revision_id", "header:X-Event-Id"},
		KeyFields: []string{"/event"}}
	for _, tc := range []struct {
		name, body, header, key, from string
	}{
		{"First", `{"payload":{"revision_id":"r1","booking_revision_id":"r2"}}`, "h1", "r1", "/payload/revision_id"},
		{"Second", `{"payload":{"booking_revision_id":"r2"}}`, "h1", "r2", "/payload/booking_revision_id"},
		{"FirstNull", `{"payload":{"revision_id":null,"booking_revision_id":"r2"}}`, "", "r2", "/payload/booking_revision_id"},
		{"Header", `{"payload":{"revision_id":true}}`, "h1", "h1", "header:X-Event-Id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("X-Event-Id", tc.header)
			}
			d := ktDerive(t, spec, h, tc.body)
			if d.Method != storage.MethodEventID || d.Key != tc.key || d.EventIDFrom != tc.from {
				t.Errorf("%s key %q from %q, want event id %q from %q", d.Method, d.Key, d.EventIDFrom, tc.key, tc.from)
			}
		})
	}
	if d := ktDerive(t, spec, nil, `{"event":"ari","payload":{}}`); d.Method != storage.MethodDerived {
		t.Errorf("no id in any place: %s key %q, want it derived from the key fields", d.Method, d.Key)
	}
	_, err := Derive(spec, nil, []byte(`{"payload":{"revision_id":false}}`))
	for _, want := range []string{`"/payload/revision_id" is a boolean`, `"/payload/booking_revision_id" is absent`, "header X-Event-Id is absent", `"/event"`} {
		if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), want) {
			t.Errorf("no id and no key field: %v; want ErrNoKey naming %s", err, want)
		}
	}
}

// TestDerive_QualifiedEventID: an event id place qualified "when POINTER = A|B" gives the
// key only in events whose field holds one of the values; other events read the next
// place, then the key fields, and the error of a keyless one says why the place was
// passed over.
func TestDerive_QualifiedEventID(t *testing.T) {
	spec := KeySpec{EventID: []string{"/rev when /event = booking|booking_new"}, KeyFields: []string{"/event", "/rev"}}
	for _, ev := range []string{"booking", "booking_new"} {
		d := ktDerive(t, spec, nil, `{"event":"`+ev+`","rev":"r1"}`)
		if d.Method != storage.MethodEventID || d.Key != "r1" || d.EventIDFrom != "/rev" {
			t.Errorf("%s: %s key %q from %q, want event id r1 from /rev", ev, d.Method, d.Key, d.EventIDFrom)
		}
	}
	alert := ktDerive(t, spec, nil, `{"event":"non_acked_booking","rev":"r1"}`)
	if alert.Method != storage.MethodDerived {
		t.Errorf("non_acked_booking: %s key %q, want it derived from the key fields", alert.Method, alert.Key)
	}
	if other := ktDerive(t, spec, nil, `{"event":"booking_unmapped_room","rev":"r1"}`); other.Key == alert.Key {
		t.Errorf("two kinds of event about one revision share the key %q", other.Key)
	}
	_, err := Derive(KeySpec{EventID: spec.EventID, KeyFields: []string{"/x"}}, nil, []byte(`{"event":"ari","rev":"r1"}`))
	if want := `event id "/rev" is read only when /event is booking or booking_new`; !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), want) {
		t.Errorf("no id for its kind and no key field: %v; want ErrNoKey saying %s", err, want)
	}
}

// TestQualifiedPlace_SpacesAreLayout: a qualified event_id or amount_field place
// written with spaces around its bars, after its last value or doubled around "when" and
// "=" (as one writes a list) reads as written without them: the event's value is read
// trimmed, and a value kept with its spaces would match no event, every event falling
// back to its key fields, every amount empty.
func TestQualifiedPlace_SpacesAreLayout(t *testing.T) {
	for _, place := range []string{
		"/rev when /event = booking_new | booking_cancellation",
		"/rev when /event = booking_new ",
		"/rev when /event =  booking_new",
		"/rev  when  /event  =  booking_new|booking_cancellation",
	} {
		spec := KeySpec{EventID: []string{place}, KeyFields: []string{"/event", "/rev"}}
		if err := spec.Validate(); err != nil {
			t.Fatalf("event_id %q: %v", place, err)
		}
		d := ktDerive(t, spec, nil, `{"event":"booking_new","rev":"r1"}`)
		if d.Method != storage.MethodEventID || d.Key != "r1" {
			t.Errorf("event_id %q: Validate accepts it, yet a booking_new event gets a %s key %q, not its event id r1",
				place, d.Method, d.Key)
		}
		// amount_field reads its qualifier the same way.
		if err := CheckAmountField([]string{place}); err != nil {
			t.Errorf("amount_field %q: %v", place, err)
		} else {
			src := Source{AmountField: []string{place}}
			var x docIndex
			doc, _, _ := canonicalBody([]byte(`{"event":"booking_new","rev":"12.50"}`))
			x.index(doc, []byte(`{"event":"booking_new","rev":"12.50"}`))
			if got := src.amountText(&x); got != "12.50" {
				t.Errorf("amount_field %q: CheckAmountField accepts it, yet a booking_new event's amount reads %q, want 12.50", place, got)
			}
		}
	}
}
