package storage

import "encoding/json"

// The JSON text that hookdedup writes and scans by hand, on its hot paths, where
// encoding/json would cost more than the little it is asked.

// AppendJSONString appends s as a JSON string, escaped as json.Marshal escapes it: a
// string of plain ASCII is copied as it is, any other is left to encoding/json. The
// hand-written JSON of the hot paths (stored headers, intake's answers) spells its
// strings here.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// JSONStringEnd returns the offset just past the string literal that starts
// at doc[i] (len(doc) when it is not closed): every scan of JSON text that steps over
// strings does it here. A plain loop: strings.IndexAny costs more than it saves on the
// short strings that fill webhook bodies.
func JSONStringEnd[T string | []byte](doc T, i int) int {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '"':
			return j + 1
		case '\\':
			j++ // skip the escaped character
		}
	}
	return len(doc)
}
