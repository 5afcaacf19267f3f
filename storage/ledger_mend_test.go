package storage_test

import (
	"math"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestLedgerMend_Apply: a daily total summed with signs, counted by magnitude, exactly
// where twice its negative amounts overflows an int64, and as unsummed where the total
// itself does not fit.
func TestLedgerMend_Apply(t *testing.T) {
	for _, c := range []struct {
		name                      string
		negatives                 []int64
		amount, unsummed, withAmt int64
		wantAmount, wantUnsummed  int64
	}{
		{"small", []int64{50, 25}, 100 - 75, 0, 3, 175, 0},
		{"twice overflows, the total fits", []int64{3e18, 3e18, 3e18}, -9e18, 0, 3, 9e18, 0},
		{"one past half an int64", []int64{5e18}, -5e18, 0, 1, 5e18, 0},
		{"the total does not fit", []int64{5e18}, 0, 0, 2, 5e18, 1}, // 5e18 - 5e18,
		{"unsummed bounded by the row", []int64{5e18}, 0, 2, 2, 5e18, 2},
		{"nothing fits", []int64{math.MaxInt64, math.MaxInt64}, math.MaxInt64 - 1, 0, 3, math.MaxInt64 - 1, 2},
	} {
		var m storage.LedgerMend
		for _, n := range c.negatives {
			m.Add(n)
		}
		amount, unsummed := m.Apply(c.amount, c.unsummed, c.withAmt)
		if amount != c.wantAmount || unsummed != c.wantUnsummed {
			t.Errorf("%s: Apply = %d, %d unsummed; want %d, %d", c.name, amount, unsummed, c.wantAmount, c.wantUnsummed)
		}
	}
}
