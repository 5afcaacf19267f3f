package web

import "testing"

// TestLocalPath pins what a return address after sign-in may be: a path on this site,
// nothing a browser could read as another site.
func TestLocalPath(t *testing.T) {
	hostile := []string{
		"",
		"evil.example",
		"evil.example/",
		"http://evil.example",
		"https://evil.example/",
		"javascript:alert(1)",
		"//evil.example",
		"///evil.example",
		"/\\evil.example",
		"\\/evil.example",
		"/\\/evil.example",
		"/events\\..\\..\\evil", // a backslash anywhere
		"/\t/evil.example",      // browsers drop the tab: //evil.example
		"/\n/evil.example",
		"/\r\n/evil.example",
		"/\x00/evil.example",
		"/\x1b/evil.example",
		"/\x7f/evil.example",
		"/\u0085/evil.example", // a C1 control (NEL)
		"/\t\t//evil.example",
		"/\xff",    // not UTF-8
		" /events", // not a path as written
		"https:/evil.example",
	}
	for _, p := range hostile {
		if got := localPath(p, "/"); got != "/" {
			t.Errorf("localPath(%q) = %q, want the default", p, got)
		}
	}
	local := []string{
		"/",
		"/events",
		"/events?booking=BK-1&source=ota",
		"/events/42",
		"/keys?state=failed#top",
		"/a//b",                // a double slash after the first segment is still this site's path
		"/%09/evil.example",    // percent-encoded: the browser keeps it in the path
		"/javascript:alert(1)", // a path segment with a colon, not a scheme
	}
	for _, p := range local {
		if got := localPath(p, "/"); got != p {
			t.Errorf("localPath(%q) = %q, want it kept", p, got)
		}
	}
}
