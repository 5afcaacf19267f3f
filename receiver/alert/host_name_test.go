package alert_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestHostNameProblem: one rule for a host name in ASCII, held by an email channel's
// EHLO and by console_names and acme_domains: at most 253 characters, said before what
// is wrong in a part; each dot-separated part 1 to 63 letters (either case), digits or
// inner hyphens.
func TestHostNameProblem(t *testing.T) {
	const label = "is not a valid host name (each dot-separated part is 1 to 63 letters, digits or inner hyphens)"
	for _, c := range []struct{ name, want string }{
		{"hooks.example.com", ""},
		{"Mail.Hotel.Example", ""},
		{"hookdedup", ""},
		{"a-b.c1", ""},
		{strings.Repeat("a", 63) + ".example", ""},
		{strings.Repeat("a", 64) + ".example", label},
		{strings.Repeat("a.", 127) + "a", "is longer than 253 characters"},
		{strings.Repeat("_.", 127) + "a", "is longer than 253 characters"},
		{"", label},
		{"hooks..example", label},
		{"hooks.example.", label},
		{"-hooks.example", label},
		{"hooks-.example", label},
		{"hooks_1.example", label},
		{"bücher.example", label},
	} {
		if got := alert.HostNameProblem(c.name); got != c.want {
			t.Errorf("HostNameProblem(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
