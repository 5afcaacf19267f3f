package storage

import (
	"encoding/json"
	"testing"
)

// The writer stores headers as encoding/json would have: the same text, so that every
// reader of the column (the console, the API, backups read by other tools) sees what
// it always saw.
func TestAppendHeadersJSON(t *testing.T) {
	for _, h := range []map[string][]string{
		{},
		{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_1"}, "Accept": {"a", "b"}},
		{"X-Empty": {}, "X-Nil": nil, "X-Blank": {""}},
		{"X-Quote": {`say "hi"\`}, "X-Html": {"<a href='x'>&</a>"}, "X-Ctl": {"a\tb\nc\x00\x1f"}},
		{"X-Utf8": {"Grüße ☃ \u2028 \u2029"}, "X-Bad": {"\xff\xfeok"}, "Ü-Name": {"v"}},
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendHeadersJSON(nil, h); string(got) != string(want) {
			t.Errorf("AppendHeadersJSON(%q)\n got %s\nwant %s", h, got, want)
		}
	}
}

func BenchmarkAppendHeadersJSON(b *testing.B) {
	h := map[string][]string{
		"Content-Type": {"application/json"}, "Content-Length": {"612"}, "User-Agent": {"Svix-Webhooks/1.24"},
		"Webhook-Id": {"msg_2Lh7mQ0f3c"}, "Webhook-Timestamp": {"1764441727"},
		"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
	}
	b.Run("Hand", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = AppendHeadersJSON(buf[:0], h)
		}
	})
	b.Run("EncodingJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(h)
		}
	})
}

// FuzzAppendHeadersJSON checks the hand-written encoding against encoding/json for any
// bytes in a header's name and values: invalid UTF-8, U+2028, HTML characters, control
// characters.
func FuzzAppendHeadersJSON(f *testing.F) {
	f.Add("Webhook-Id", "msg_1", "")
	f.Add("X-Html", "<a href='x'>&</a>", "\u2028\u2029")
	f.Add("\xff\xfe", "a\tb\nc\x00\x1f\x7f", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, name, v1, v2 string) {
		for _, h := range []map[string][]string{
			{name: {v1, v2}},
			{name: {v1}, v2: nil, "Content-Type": {v2}},
		} {
			want, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendHeadersJSON(nil, h); string(got) != string(want) {
				t.Errorf("AppendHeadersJSON(%q)\n got %s\nwant %s", h, got, want)
			}
		}
	})
}
