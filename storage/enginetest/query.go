package enginetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func TestFirstKeyDeliveries(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	var want []int64
	for i := range 5 {
		want = append(want, recordEvent(t, db, "ota", "evt_many", fmt.Sprint("h", i), "P", "B", "cancelled", "").ID)
	}
	recordEvent(t, db, "cm", "evt_many", "h", "P", "B", "cancelled", "") // another source's key
	for _, tc := range []struct {
		limit int
		ids   []int64
		more  bool
	}{{3, want[:3], true}, {4, want[:4], true}, {5, want, false}, {9, want, false}, {-1, want, false}} {
		ds, more, err := db.FirstKeyDeliveries(ctx, "ota", "evt_many", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(ds), tc.ids) || more != tc.more {
			t.Errorf("limit %d: %v more %v, want %v more %v", tc.limit, ids(ds), more, tc.ids, tc.more)
		}
	}
}
