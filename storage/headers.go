package storage

import "slices"

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
