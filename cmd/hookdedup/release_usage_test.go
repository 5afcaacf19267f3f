package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_ReleaseSaysWhatIsMissing: a release command line that lacks what a release
// needs is refused with what it lacks, then the usage: the usage alone left an operator
// who wrote --reason " " (a reason of blanks, which counts as none) or forgot the key
// to find the difference between their line and the usage.
func TestCLI_ReleaseSaysWhatIsMissing(t *testing.T) {
	cli := cliOn(filepath.Join(t.TempDir(), "t.db"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"release", "evt_1", "--reason", "PMS restored"}, "--source is required"},
		{[]string{"release", "--source", "ota", "evt_1"}, "--reason is required"},
		{[]string{"release", "--source", "ota", "evt_1", "--reason", "  "}, "--reason is required"},
		{[]string{"release", "--source", "ota", "--reason", "PMS restored"}, "name the KEY to release, or --stuck or --state for several"},
		{[]string{"release", "--source", "ota", "evt_1", "evt_2", "--reason", "PMS restored"}, `one KEY at a time, not 2 ("evt_1", "evt_2")`},
		{[]string{"release", "--source", "ota", "--stuck", "evt_1", "--reason", "PMS restored"}, `a KEY ("evt_1") with --stuck or --state`},
	} {
		out, err := cli(tc.args...)
		if err == nil {
			t.Errorf("%q: taken (%s); want it refused", tc.args, strings.TrimSpace(out))
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "usage: hookdedup release") {
			t.Errorf("%q: %q; want it to say %q, then the usage", tc.args, msg, tc.want)
		}
	}
}
