package storage

import "testing"

// A probe's business key match makes its delivery a duplicate only where its source
// blocks, and only a business key match does: a correlation or a late duplicate is a
// flag, the delivery accepted.
func TestProbe_BlockedBy(t *testing.T) {
	business := Suspect{Kind: SuspectBusinessKey, Other: 41}
	others := []Suspect{{Kind: SuspectCorrelation, Other: 7}, {Kind: SuspectLateDuplicate, Other: 9}}
	for _, c := range []struct {
		name   string
		blocks bool
		flags  []Suspect
		want   int64 // 0: not blocked
	}{
		{"blocks, business key found", true, append(others[:1:1], business), 41},
		{"blocks, other flags only", true, others, 0},
		{"blocks, nothing found", true, nil, 0},
		{"does not block", false, append(others[:1:1], business), 0},
	} {
		got, ok := Probe{BusinessBlocks: c.blocks}.BlockedBy(c.flags)
		if ok != (c.want != 0) || got.Other != c.want {
			t.Errorf("%s: %v, %v; want delivery %d", c.name, got, ok, c.want)
		}
	}
}
