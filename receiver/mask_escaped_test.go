package receiver

import "testing"

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
