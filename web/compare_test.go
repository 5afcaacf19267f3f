package web

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestCompareWith: which delivery a delivery's page compares it with.
func TestCompareWith(t *testing.T) {
	dl := func(id int64, hash string) storage.Delivery { return storage.Delivery{ID: id, PayloadHash: hash} }
	first, same, differs, later := dl(1, "a"), dl(2, "a"), dl(3, "b"), dl(4, "a")
	beyond := dl(500, "c")
	for _, tc := range []struct {
		name   string
		d      storage.Delivery
		listed []storage.Delivery
		with   int64
		past   *storage.Delivery
		want   int64 // 0: none
	}{
		{"OnlyDelivery", first, []storage.Delivery{first}, 0, nil, 0},
		{"OnlyDeliveryAsksForItself", first, []storage.Delivery{first}, 1, nil, 0},
		{"LaterAgainstFirst", later, []storage.Delivery{first, same, differs, later}, 0, nil, 1},
		{"FirstAgainstFirstThatDiffers", first, []storage.Delivery{first, same, differs, later}, 0, nil, 3},
		{"FirstAgainstSecondWhenAllSame", first, []storage.Delivery{first, same, later}, 0, nil, 2},
		{"WithListed", later, []storage.Delivery{first, same, differs, later}, 2, nil, 2},
		{"WithItselfIsNoChoice", later, []storage.Delivery{first, same, differs, later}, 4, nil, 1},
		{"WithUnknown", later, []storage.Delivery{first, same, later}, 99, nil, 1},
		{"WithPastTheListed", later, []storage.Delivery{first, same, later}, 500, &beyond, 500},
		{"PastNotAskedFor", later, []storage.Delivery{first, same, later}, 0, &beyond, 1},
		{"ThisPastTheListed", beyond, []storage.Delivery{first, same, beyond}, 0, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareWith(tc.d, tc.listed, tc.with, tc.past)
			var id int64
			if got != nil {
				id = got.ID
			}
			if id != tc.want {
				t.Errorf("compareWith(%d, with=%d) = %d, want %d", tc.d.ID, tc.with, id, tc.want)
			}
		})
	}
}
