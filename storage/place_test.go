package storage_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestCutPlace: a qualified place reads from its pointer in events whose condition's
// value is one of its list; spaces around the parts are layout, for the receiver that
// reads the place and the console that names its field alike.
func TestCutPlace(t *testing.T) {
	for _, tc := range []struct {
		place, from, when string
		qualified         bool
		in, out           string // a value the list names, and one it does not
	}{
		{"/amount", "/amount", "", false, "", ""},
		{"/amount_refunded when /type = charge.refunded", "/amount_refunded", "/type", true, "charge.refunded", "charge.succeeded"},
		{"/rev  when  /event  =  booking_new | booking_cancellation ", "/rev", "/event", true, "booking_cancellation", "booking"},
	} {
		from, when, list, qualified := storage.CutPlace(tc.place)
		if from != tc.from || when != tc.when || qualified != tc.qualified || storage.PlacePointer(tc.place) != tc.from {
			t.Errorf("CutPlace(%q) = %q, %q, %v; want %q, %q, %v", tc.place, from, when, qualified, tc.from, tc.when, tc.qualified)
		}
		if qualified && (!storage.PlaceListHas(list, tc.in) || storage.PlaceListHas(list, tc.out)) {
			t.Errorf("%q: list %q names %q: %v, %q: %v", tc.place, list, tc.in, storage.PlaceListHas(list, tc.in), tc.out, storage.PlaceListHas(list, tc.out))
		}
	}
}
