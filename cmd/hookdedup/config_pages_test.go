package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// cache_size and mmap_size: defaults, the file, the environment and flags, in that
// order of precedence, and a clear error for a value that is no size.
func TestConfig_PageSettings(t *testing.T) {
	load := func(toml string, getenv map[string]string, args ...string) (config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "h.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		e := env{getenv: func(k string) string { return getenv[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("serve", e)
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			return config{}, err
		}
		return f.load(e)
	}
	for _, tc := range []struct {
		name        string
		toml        string
		env         map[string]string
		args        []string
		cache, mmap int64
	}{
		{"Defaults", "", nil, nil, sqlite.DefaultCacheSize, sqlite.DefaultMmapSize},
		{"File", "cache_size = 1048576\nmmap_size = 0\n", nil, nil, 1 << 20, 0},
		{"Environment", "cache_size = 1048576\n", map[string]string{"HOOKDEDUP_CACHE_SIZE": "2097152", "HOOKDEDUP_MMAP_SIZE": "4096"}, nil, 2 << 20, 4096},
		{"Flags", "cache_size = 1048576\n", map[string]string{"HOOKDEDUP_CACHE_SIZE": "2097152"}, []string{"--cache-size", "3145728", "--mmap-size", "0"}, 3 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := load(tc.toml, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CacheSize != tc.cache || cfg.MmapSize != tc.mmap {
				t.Errorf("cache_size %d, mmap_size %d; want %d, %d", cfg.CacheSize, cfg.MmapSize, tc.cache, tc.mmap)
			}
		})
	}
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		want       string
	}{
		{"FileZeroCache", "cache_size = 0\n", nil, "cache_size"},
		{"FileNegativeMmap", "mmap_size = -1\n", nil, "mmap_size"},
		{"EnvironmentWords", "", map[string]string{"HOOKDEDUP_CACHE_SIZE": "64MiB"}, `"64MiB" is not a number of bytes from 1024 to 2199023255552`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.toml, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
