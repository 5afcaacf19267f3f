package receiver

import (
	"runtime"
	"strings"
	"testing"
)

// allocBytes is what f allocates, in bytes, averaged over n runs.
func allocBytes(n int, f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
}

// A key field holding a long string of digits (a snowflake id sent as text, a
// gid://shopify/Order/820982911946154508) holds no number that float64 rounds: deriving
// its key must not copy the whole body once more, on every delivery.
func TestDerive_DigitStringCopiesNoBody(t *testing.T) {
	pad := strings.Repeat("x", 512<<10)
	spec := KeySpec{KeyFields: []string{"/order"}}
	body := func(order string) []byte {
		return []byte(`{"order":"` + order + `","pad":"` + pad + `"}`)
	}
	short, long := body("gid://shopify/Order/82"), body("gid://shopify/Order/820982911946154508")
	base := allocBytes(5, func() {
		if _, _, err := derive(spec, nil, short); err != nil {
			t.Fatal(err)
		}
	})
	got := allocBytes(5, func() {
		if _, _, err := derive(spec, nil, long); err != nil {
			t.Fatal(err)
		}
	})
	if got > base+uint64(len(pad))/2 {
		t.Errorf("derive allocates %d bytes for a 20-digit string field, %d for a short one: the body is copied again", got, base)
	}

	src := &Source{BusinessKey: []string{"/order"}}
	bk := func(event []byte) func() {
		der, doc, err := derive(spec, nil, event)
		if err != nil || der.Key == "" {
			t.Fatal(err)
		}
		var x docIndex
		x.index(doc, event)
		return func() { src.businessKey(&x) }
	}
	base, got = allocBytes(5, bk(short)), allocBytes(5, bk(long))
	if got > base+uint64(len(pad))/2 {
		t.Errorf("businessKey allocates %d bytes for a 20-digit string field, %d for a short one: the event is copied again", got, base)
	}
}

func TestMayBeRounded(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{`9007199254740993`, true},
		{`[1,{"a":-12345678901234567}]`, true},
		{`1e+21`, true},
		{`"820982911946154508"`, false},
		{`{"a":"x\"1234567890123456","b":1}`, false},
		{`{"a":"x\\","b":12345678901234567}`, true},
		{`"1e+21"`, false},
		{`123456789012345`, false},
	}
	for _, tt := range tests {
		if got := mayBeRounded(tt.v); got != tt.want {
			t.Errorf("mayBeRounded(%s) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
