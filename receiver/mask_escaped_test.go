package receiver

import (
	"strings"
	"testing"
	"time"
)

// The forms of a secret that matchEscaped takes, and a few that are not the secret.
func TestMatchEscaped(t *testing.T) {
	for _, c := range []struct {
		text, secret string
		want         int
	}{
		{"tok&en/x!", "tok&en/x", 8},
		{"tok&amp;en&#x2F;x!", "tok&en/x", 17},
		{"tok&AMP;en&#X2f;x", "tok&en/x", 17},
		{"tok&#38;en&#0047;x", "tok&en/x", 18},
		{"tok&sol;", "tok/", 8},
		{`tok\u0026en\/x`, "tok&en/x", 14},
		{`tok\u0026en\u002fx`, "tok&en/x", 18},
		{"caf\\u00e9!", "café", 9},
		{"caf&#233;!", "café", 9},
		// A secret that holds an escape's text as its own characters.
		{"a&amp;b", "a&amp;b", 7},
		{"a&amp;amp;b", "a&amp;b", 11},
		{"tok&amp", "tok&", 4},
		{"tok&bogus;en", "tok&en", 0},
		{"tok&#x26en", "tok&en", 0},
		{"tok&#-38;en", "tok&en", 0},
		{`tok\u00`, "tok&", 0},
		{"to", "tok", 0},
		{"tok&#x110000;", "tok\U0010FFFF", 0},
	} {
		if got := matchEscaped(c.text, c.secret); got != c.want {
			t.Errorf("matchEscaped(%q, %q) = %d, want %d", c.text, c.secret, got, c.want)
		}
	}
}

// A secret holding a run of backslashes (a query's %5C) can be spelt in a JSON answer
// with each of them escaped or not, in any mix: an answer of such runs cut one short,
// at every offset of the excerpt, is read in time linear in their length, not in the
// number of mixes (Fibonacci in it), which held a dispatch worker for hours.
func TestMatchEscapedBackslashRunIsQuick(t *testing.T) {
	secret := strings.Repeat(`\`, 48)
	text := strings.Repeat(strings.Repeat(`\`, 47)+"x", 30)
	done := make(chan string, 1)
	go func() { done <- maskedPrefix(text, []string{secret}, responseExcerpt) }()
	select {
	case got := <-done:
		if got != text[:min(len(text), responseExcerpt)] {
			t.Errorf("masked an answer that does not hold the secret: %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("masking an answer of backslash runs took over 5 s")
	}
	// Each run spelt whole, with its backslashes escaped or not, is masked.
	mixed := strings.Repeat(`\\`, 24) + strings.Repeat(`\`, 24) + "!"
	if got := matchEscaped(mixed, secret); got != len(mixed)-1 {
		t.Errorf("matchEscaped(mixed run) = %d, want %d", got, len(mixed)-1)
	}
}
