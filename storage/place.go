package storage

import "strings"

// A place of event_id or amount_field may be qualified, read only in some events:
// "/payload/booking_revision_id when /event = booking_new|booking_cancellation". The
// grammar is here, where the receiver that reads the places and the console that names
// their fields both find it. A header name holds no space, and a pointer is cut at the
// first " when ", so a place whose own pointer holds " when " cannot be qualified.
const (
	placeWhen = " when "
	placeIs   = " = "
)

// CutPlace cuts a place into where it reads (from) and, when it is qualified, the
// pointer its condition reads (when) and the values it is read for (list, "a|b").
// Spaces around the parts are layout, as one writes a list ("a | b"): an event's value
// is read trimmed, and a value kept with its spaces would match no event. A qualifier
// without " = " has when set to all of it and list "".
func CutPlace(place string) (from, when, list string, qualified bool) {
	from, cond, ok := strings.Cut(place, placeWhen)
	if !ok {
		return place, "", "", false
	}
	when, list, _ = strings.Cut(cond, placeIs)
	return strings.TrimSpace(from), strings.TrimSpace(when), list, true
}

// CutCondition cuts a condition of the no_money setting, "/success = false|FALSE",
// into the pointer it reads and the values it holds for (list, "a|b"), as a place's
// qualifier is written; ok is false when it has no " = ".
func CutCondition(cond string) (at, list string, ok bool) {
	at, list, ok = strings.Cut(cond, placeIs)
	return strings.TrimSpace(at), list, ok
}

// PlacePointer returns where a place reads, its qualifier aside ("/id when /type = a|b"
// reads /id).
func PlacePointer(place string) string {
	from, _, _, _ := CutPlace(place)
	return from
}

// PlaceListHas reports whether list, a qualifier's values, names v. It allocates
// nothing: a qualified place is checked on every delivery.
func PlaceListHas(list, v string) bool {
	for list != "" {
		var item string
		item, list, _ = strings.Cut(list, "|")
		if strings.TrimSpace(item) == v {
			return true
		}
	}
	return false
}
