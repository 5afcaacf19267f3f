package storage

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// RedactedSegment is what a path segment that may be a credential is shown as.
const RedactedSegment = "xxxxx"

// RedactPath masks each segment of u's path that may be a credential, for the console
// and the CLI to show: Slack's incoming webhooks
// (/services/T00000000/B00000000/<24-character token>), Discord's
// (/api/webhooks/<id>/<68-character token>) and many others carry their secret there,
// not in the query. It is here, not in web, because the alert channels' targets (in
// receiver) are shown under the same rule.
//
// A segment, as it decodes, is kept when it is under 16 characters, or under 32 and
// made of lower-case ASCII words, each under 16 letters, joined by '-', '_' or '.'
// (webhook-receiver, booking_events). Any other becomes RedactedSegment: 16 or more
// characters with a digit, an upper-case letter, a long run of letters or anything
// beyond ASCII, and every segment of 32 or more. The rule errs towards masking: a UUID
// or a long numeric id is masked too, as some services' ids are their secret (a
// webhook.site URL, an Office 365 connector's), and a masked id costs a look at the
// configuration where a shown token costs the credential. A token under 16 characters
// is not recognised: a downstream whose secret is that short should take it in the
// query or as the URL's password, which are always masked.
func RedactPath(u *url.URL) {
	p := u.EscapedPath()
	segs := strings.Split(p, "/")
	changed := false
	for i, s := range segs {
		if maskSegment(s) {
			segs[i], changed = RedactedSegment, true
		}
	}
	if !changed {
		return
	}
	p = strings.Join(segs, "/")
	// The escaped segments that stay are as they were, so p decodes.
	u.Path, _ = url.PathUnescape(p)
	u.RawPath = p
}

// maskSegment reports whether the escaped path segment raw may be a credential.
func maskSegment(raw string) bool {
	s, err := url.PathUnescape(raw)
	if err != nil {
		return true // url.Parse refuses a bad escape, so only a hand-built URL gets here
	}
	n := utf8.RuneCountInString(s)
	switch {
	case n < 16:
		return false
	case n >= 32:
		return true
	}
	run := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z':
			if run++; run >= 16 {
				return true
			}
		case c == '-' || c == '_' || c == '.':
			run = 0
		default:
			return true // a digit, an upper-case letter, or anything else
		}
	}
	return false
}
