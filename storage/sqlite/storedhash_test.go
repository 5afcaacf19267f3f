package sqlite

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestStoredHash: the lower-case hex of a SHA-256, as the receiver makes every hash, is
// stored as its 32 bytes; anything else stays the text it is, so that it matches only
// itself (upper-case hex is another text than the receiver's, not the same bytes).
func TestStoredHash(t *testing.T) {
	sum := "9f2b5c0e4a7d1f3b6c8e0a2d4f6b8c0e2a4d6f8b0c2e4a6d8f0b2c4e6a8d0f2b"
	want, _ := hex.DecodeString(sum)
	if b, ok := storedHash(sum).([]byte); !ok || !bytes.Equal(b, want) {
		t.Errorf("storedHash(%q) = %#v, want its 32 bytes", sum, storedHash(sum))
	}
	all := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	want, _ = hex.DecodeString(all)
	if b, ok := storedHash(all).([]byte); !ok || !bytes.Equal(b, want) {
		t.Errorf("storedHash(%q) = %#v, want its 32 bytes", all, storedHash(all))
	}
	for _, text := range []string{
		"",
		sum[:63],
		sum + "0",
		strings.ToUpper(sum),
		sum[:10] + "G" + sum[11:],
		sum[:63] + "/",   // '/' is just below '0'
		sum[:63] + ":",   // ':' just above '9'
		sum[:63] + "`",   // '`' just below 'a'
		sum[:63] + "g",   // 'g' just above 'f'
		"\x00" + sum[1:], // a NUL
		"é" + sum[2:],    // a two-byte rune in 64 bytes
		"booking-4711",
	} {
		if s, ok := storedHash(text).(string); !ok || s != text {
			t.Errorf("storedHash(%q) = %#v, want the text itself", text, storedHash(text))
		}
	}
}
