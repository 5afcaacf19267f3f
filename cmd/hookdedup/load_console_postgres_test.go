//go:build load

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestLoadConsolePostgres times the console and the JSON API on PostgreSQL with
// BENCH_PG_CONSOLE_KEYS keys stored (1 M unless told; 0 skips it, as BENCH_POSTGRES=0
// does), as TestLoad times them on SQLite: a file is filled as TestLoad fills it (or
// BENCH_DIR's stored/ is taken as it is, with BENCH_FILLED=1, at TestLoadFill's size),
// copied into a fresh database of the throwaway cluster by `hookdedup migrate`, as an
// operator moving to PostgreSQL would, and one replica of serve, after a few seconds of
// traffic, answers the same pages. The deliveries of that traffic are still being
// rolled up into the dashboard's hourly totals as the pages are timed: the dashboard
// reads them one by one meanwhile.
func TestLoadConsolePostgres(t *testing.T) {
	k := loadReadKnobs(t)
	n := loadEnvInt(t, "BENCH_PG_CONSOLE_KEYS", 1_000_000)
	if n == 0 || !k.postgres {
		t.Skip("BENCH_PG_CONSOLE_KEYS=0 or BENCH_POSTGRES=0")
	}
	dir := k.dir
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "stored", "hookdedup.db")
	if k.filled && len(k.keys) > 0 {
		n = k.keys[0] // TestLoadFill's size
	} else {
		path = filepath.Join(dir, "pg-console", "hookdedup.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		loadFill(t, path, 1, n, false)
	}
	token := loadConsoleUserAdd(t, path)

	url := postgrestest.NewDatabase(t)
	start := time.Now()
	out, err := exec.Command(hookdedupBinary(t), "migrate", "--database", path, "--to", url).CombinedOutput()
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	fmt.Printf("  migrated %s keys into PostgreSQL in %s\n", loadCount(n), time.Since(start).Round(time.Second))
	loadPostgresSettle(t, url)

	sub := filepath.Join(dir, "pg-console-serve")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	s := loadServeBinary(t, hookdedupBinary(t), sub, url, "FULL")
	defer s.stop()
	// Some traffic first, half duplicates, as TestLoad's runs leave before it times the
	// console: the pages of duplicates need some.
	loadWrk(t, k, s.url, "half", 5*time.Second)
	ts := loadConsole(t, s, token, 1, n)
	var b strings.Builder
	loadConsoleReport(&b, loadCount(n)+" (PostgreSQL, one replica)", ts)
	fmt.Print(b.String())
}
