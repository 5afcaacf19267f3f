package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConfig_ApprovalThreshold reads [approval_threshold] and refuses what is not an
// amount in a currency, naming the setting and what was wrong.
func TestConfig_ApprovalThreshold(t *testing.T) {
	load := func(t *testing.T, toml string) (config, error) {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		return loadConfig(path, true, func(string) string { return "" })
	}
	cfg, err := load(t, "[approval_threshold]\nEUR = \"1000.00\"\njpy = \"150000\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (storage.ApprovalThresholds{"EUR": "1000.00", "JPY": "150000"}); !reflect.DeepEqual(cfg.ApprovalThreshold, want) {
		t.Errorf("%v; want %v", cfg.ApprovalThreshold, want)
	}
	for _, tt := range []struct{ toml, want string }{
		{"[approval_threshold]\nEUR = 1000\n", `EUR = 1000: write the amount as a string`},
		{"[approval_threshold]\nEUR = \"a lot\"\n", `EUR = "a lot": want a non-negative amount`},
		{"[approval_threshold]\nEURO = \"1\"\n", `"EURO" is not a currency code`},
		{"[approval_threshold]\nJPY = \"10.5\"\n", "JPY has 0 decimal places"},
	} {
		_, err := load(t, tt.toml)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "approval_threshold") {
			t.Errorf("%q: %v; want an error saying %q", tt.toml, err, tt.want)
		}
	}
}
