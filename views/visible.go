package views

import (
	"context"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
)

// Visible returns s with every character that would hide itself or rearrange the text
// around it written as an escape: control characters (Unicode category Cc), invisible
// format characters (Cf: the bidi controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F
// and U+061C, zero-width characters, soft hyphens, tag characters), the other characters
// Unicode says render as nothing (Default_Ignorable_Code_Point: Hangul fillers, the
// combining grapheme joiner), variation selectors, spaces other than U+0020 (category
// Zs: U+00A0, U+3000…) and the blank Braille pattern U+2800, the line and paragraph
// separators U+2028 and U+2029, and bytes that are not UTF-8. (visBlock, for bodies,
// leaves variation selectors, spaces and U+2800 as they are: there they are text.) An event id holding U+202E would
// otherwise render reversed, and one ending in U+3164 would look like the id without it:
// either could pass for another key.
//
// The escapes are the ones JSON and Go read: \n, \r and \t for those three, \u202e for
// the rest of the Basic Multilingual Plane, \U000e0041 above it, and \xff for a byte that
// is not UTF-8. Everything else, backslashes included, is left as it is.
func Visible(s string) string {
	i, _ := nextHidden(s, 0, visValue)
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	for start := 0; start < len(s); {
		i, w := nextHidden(s, start, visValue)
		b = append(b, s[start:i]...)
		if w > 0 {
			b = appendEscape(b, s[i:i+w])
		}
		start = i + w
	}
	return string(b)
}

// vis renders s as text, with what Visible escapes shown as escapes in a span of class
// "esc", so that the page marks them as not part of the value as sent.
func vis(s string) templ.Component { return visComponent{s: s} }

// visBlock is vis for a body in a <pre> (a payload, a response): line breaks and tabs
// stay as they are, since they are the text's layout, and so do variation selectors,
// Unicode's spaces and U+2800, which are a body's text (an emoji's U+FE0F, a Japanese
// name's U+3000).
func visBlock(s string) templ.Component { return visComponent{s: s, mode: visBody} }

// visLine is vis for one line of a diff: its tabs stay as they are, and what visBlock
// keeps as text is shown as escapes, since a line is there to show what differs.
func visLine(s string) templ.Component { return visComponent{s: s, mode: visDiffLine} }

// visMode says what a rendering of text keeps as it is.
type visMode uint8

const (
	visValue    visMode = iota // a single value: every hidden character escaped
	visDiffLine                // a line of a diff: tabs kept
	visBody                    // a body: its layout and its text kept
)

type visComponent struct {
	s    string
	mode visMode
}

func (c visComponent) Render(_ context.Context, w io.Writer) error {
	s := c.s
	i, width := nextHidden(s, 0, c.mode)
	if width == 0 {
		_, err := io.WriteString(w, templ.EscapeString(s))
		return err
	}
	var b strings.Builder
	for start := 0; ; {
		b.WriteString(templ.EscapeString(s[start:i]))
		if width == 0 {
			break
		}
		b.WriteString(`<span class="esc">`)
		for hide := true; hide; { // one marker around a run of escapes
			var e [16]byte
			b.Write(appendEscape(e[:0], s[i:i+width]))
			i += width
			hide, width = hiddenAt(s, i, c.mode)
		}
		b.WriteString(`</span>`)
		start = i
		i, width = nextHidden(s, start, c.mode)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nextHidden returns where the first character to escape at or after i starts and its
// width in bytes; len(s) and 0 when there is none.
func nextHidden(s string, i int, mode visMode) (int, int) {
	for i < len(s) {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++ // printable ASCII: the common case, decided without decoding
			continue
		}
		hide, w := hiddenAt(s, i, mode)
		if hide {
			return i, w
		}
		i += w
	}
	return len(s), 0
}

// hiddenAt decodes the character that starts at s[i] and says whether it is to be
// escaped, with its width in bytes (0 past the end).
func hiddenAt(s string, i int, mode visMode) (bool, int) {
	if i >= len(s) {
		return false, 0
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && w == 1:
		return true, 1 // not UTF-8
	case mode == visBody && (r == '\n' || r == '\t' || r == '\r'), mode == visDiffLine && r == '\t':
		return false, w
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029',
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return true, w
	case mode != visBody && (unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Zs, r) && r != ' ' || r == '\u2800'):
		// In a single value (a key, a booking, a name) these make it pass for another;
		// in a body they are its text: an emoji's U+FE0F, a Japanese name's U+3000.
		return true, w
	}
	return false, w
}

// appendEscape appends the escape of the one character (or stray byte) in c.
func appendEscape(b []byte, c string) []byte {
	r, w := utf8.DecodeRuneInString(c)
	switch {
	case r == utf8.RuneError && w == 1:
		b = append(b, `\x`...)
		return appendHex(b, uint32(c[0]), 2)
	case r == '\n':
		return append(b, `\n`...)
	case r == '\r':
		return append(b, `\r`...)
	case r == '\t':
		return append(b, `\t`...)
	case r > 0xffff:
		b = append(b, `\U`...)
		return appendHex(b, uint32(r), 8)
	}
	b = append(b, `\u`...)
	return appendHex(b, uint32(r), 4)
}

// appendHex appends v in lower-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint32, width int) []byte {
	h := strconv.FormatUint(uint64(v), 16)
	for range width - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}
