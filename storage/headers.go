package storage

import (
	"encoding/json"
	"slices"
)

// AppendHeadersJSON appends h as JSON, as json.Marshal writes it (names in order), to
// b. Written out by hand: through encoding/json's reflection it was a tenth of a
// delivery's CPU in the writers' callers. Names and values of plain ASCII, nearly all of
// them, are copied as they are; any other is left to encoding/json.
func AppendHeadersJSON(b []byte, h map[string][]string) []byte {
	var names [32]string
	keys := names[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		vs := h[k]
		if vs == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

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
