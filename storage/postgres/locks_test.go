package postgres

import (
	"hash/fnv"
	"testing"
)

// TestForensicKeyLockID: the key locks' ids are FNV-1a of their strings, each ended by a
// zero byte, as every replica computes them, whatever its version: two that disagreed
// would not exclude each other.
func TestForensicKeyLockID(t *testing.T) {
	for _, c := range [][3]string{
		{"claim", "ota", "msg_0001"},
		{"business", "ota", "9f2b5c0e4a7d1f3b6c8e0a2d4f6b8c0e2a4d6f8b0c2e4a6d8f0b2c4e6a8d0f2b"},
		{"correlation", "double-refund", ""},
		{"", "", ""},
		{"claim", "ota\x00x", "\xff\xfe é"},
	} {
		h := fnv.New32a()
		for _, s := range c {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		if got, want := forensicKeyLockID(c[0], c[1], c[2]), int32(h.Sum32()); got != want {
			t.Errorf("forensicKeyLockID(%q, %q, %q) = %d, want %d", c[0], c[1], c[2], got, want)
		}
	}
}
