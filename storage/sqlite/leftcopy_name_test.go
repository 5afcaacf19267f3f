package sqlite

import "testing"

// TestLeftCopyOf: the names tempBeside gives, and only those, name the file they copy.
func TestLeftCopyOf(t *testing.T) {
	for _, c := range []struct {
		name, of string
		ok       bool
	}{
		{".hookdedup.db.123.tmp", "hookdedup.db", true},
		{".hookdedup-2026-12-06.db.4242.tmp", "hookdedup-2026-12-06.db", true},
		{".a.0.tmp", "a", true},
		{".hookdedup.db.tmp", "", false},
		{".hookdedup.db.12x.tmp", "", false},
		{".hookdedup.db..tmp", "", false},
		{"..5.tmp", "", false},
		{".5.tmp", "", false},
		{"hookdedup.db.123.tmp", "", false},
		{".hookdedup.db.123.tmp-journal", "", false},
		{".hookdedup.db.123", "", false},
	} {
		if of, ok := leftCopyOf(c.name); of != c.of || ok != c.ok {
			t.Errorf("leftCopyOf(%q) = %q, %v; want %q, %v", c.name, of, ok, c.of, c.ok)
		}
	}
}
