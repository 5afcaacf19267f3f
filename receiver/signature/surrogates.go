package signature

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MendLoneSurrogates rewrites in place each escaped lone surrogate of the JSON text b,
// valid or not, as \ufffd, and returns b. RFC 8259 lets a string hold one (text cut in
// the middle of an emoji by the sender's serialiser), but jsontext refuses it; a parser
// reads b mended so as encoding/json reads the original. Each escape keeps its six
// bytes, so an offset in an error about the mended text is one in the original.
func MendLoneSurrogates(b []byte) []byte {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escaped character, a backslash perhaps: not the start of another
			continue
		}
		v, ok := hexUnit(b, i+2)
		if !ok || !utf16.IsSurrogate(rune(v)) {
			i += 5
			continue
		}
		if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if v2, ok := hexUnit(b, i+8); ok && utf16.DecodeRune(rune(v), rune(v2)) != utf8.RuneError {
				i += 11
				continue
			}
		}
		copy(b[i:], `\ufffd`)
		i += 5
	}
	return b
}

// hexUnit reads the four hex digits at b[i:], either case.
func hexUnit(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return uint16(v), err == nil
}
