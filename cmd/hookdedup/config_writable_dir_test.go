package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A configuration file only its owner writes, in a directory other users can write
// (no sticky bit), can be replaced by any of them (rename or delete and create): the
// same hole as a writable file, and no warning names it.
func TestConfig_WritableDirectoryIsWarnedOf(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(path, []byte("retention = \"240h\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, true, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.writableFile(); got == "" {
		t.Errorf("configuration file %s in a directory of mode 0777: no warning", path)
	}
}
