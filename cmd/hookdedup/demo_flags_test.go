package main

import (
	"strings"
	"testing"
)

// A flag that demo's mode leaves unused is refused, naming it, before anything is
// printed or sent: --print-config --events 5 printed the configuration and exited 0,
// and --provider stripe --forensics sent no Stripe traffic, both without a word.
func TestDemo_RefusesAFlagItsModeLeavesUnused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--print-config", "--events", "5"}, "--events"},
		{[]string{"--print-config", "--forensics"}, "--forensics"},
		{[]string{"--print-config", "--url", "http://127.0.0.1:1"}, "--url"},
		{[]string{"--print-config", "--provider", "stripe"}, "--provider"},
		{[]string{"--forensics", "--provider", "stripe"}, "--provider"},
		{[]string{"--provider", "stripe", "--forensics"}, "--provider"},
		{[]string{"--forensics", "--events", "5"}, "--events"},
		{[]string{"--forensics", "--source", "ota"}, "--source"},
		{[]string{"--forensics", "--duplicates", "0.5"}, "--duplicates"},
	} {
		args := append([]string{"--database", dir + "/none.db", "--url", "http://127.0.0.1:1"}, tc.args...)
		if tc.args[0] == "--print-config" {
			args = append([]string{"--database", dir + "/none.db"}, tc.args...)
		}
		out, err := runDemoCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), "takes no "+tc.flag) {
			t.Errorf("demo %s = %v, want an error naming %s\n%s", strings.Join(tc.args, " "), err, tc.flag, out)
			continue
		}
		if strings.Contains(out, "[[source]]") {
			t.Errorf("demo %s printed the configuration before refusing:\n%s", strings.Join(tc.args, " "), out)
		}
	}
	// Each mode still runs with the flags it uses.
	if out, err := runDemoCmd(t, "--print-config"); err != nil || !strings.Contains(out, "[[source]]") {
		t.Fatalf("demo --print-config = %v\n%s", err, out)
	}
}
