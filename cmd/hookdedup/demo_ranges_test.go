package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_DemoRangesNamed: demo's --events and --duplicates out of range are refused
// each with its own value named, not with one sentence about both that leaves the
// operator to work out which of them was wrong.
func TestCLI_DemoRangesNamed(t *testing.T) {
	cli := cliOn(filepath.Join(t.TempDir(), "t.db"))
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"demo", "--events", "0"}, "--events 0: want 1 or more", "--duplicates"},
		{[]string{"demo", "--events", "-3"}, "--events -3: want 1 or more", "--duplicates"},
		{[]string{"demo", "--duplicates", "1.5"}, "--duplicates 1.5: want a fraction from 0 to 1", "--events"},
		{[]string{"demo", "--duplicates", "NaN"}, "--duplicates NaN: want a fraction from 0 to 1", "--events"},
	} {
		_, err := cli(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
			t.Errorf("%s: %v; want %q, without %s", strings.Join(tc.args, " "), err, tc.want, tc.not)
		}
	}
}
