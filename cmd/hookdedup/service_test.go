package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// generateUnits runs "hookdedup service --write DIR args..." in process for the binary
// exe, with no directory hidden (the tests' files live under /tmp, which the unit's
// PrivateTmp hides; TestService_Refuses covers that), and returns the files it wrote.
func generateUnits(t *testing.T, exe string, args ...string) map[string]string {
	t.Helper()
	return generateUnitsEnv(t, exe, nil, args...)
}

// generateUnitsEnv is generateUnits with the HOOKDEDUP_* variables of environ set.
func generateUnitsEnv(t *testing.T, exe string, environ map[string]string, args ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	e := env{getenv: func(k string) string { return environ[k] }, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	if err := serviceUnits(append([]string{"--write", dir}, args...), e, exe, nil); err != nil {
		t.Fatalf("service %v: %v\n%s", args, err, stderr.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	var paths []string
	for _, ent := range entries {
		path := filepath.Join(dir, ent.Name())
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %o, want 0644", ent.Name(), info.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[ent.Name()] = string(b)
		paths = append(paths, path)
	}
	if !strings.Contains(stdout.String(), "systemctl enable --now hookdedup.service") {
		t.Errorf("service --write does not say how to start it:\n%s", stdout.String())
	}
	verifyUnits(t, paths)
	return files
}

// verifyUnits runs systemd-analyze verify on the unit files and fails on any complaint:
// it exits 0 on an unknown or misspelt setting, which it only reports.
func verifyUnits(t *testing.T, paths []string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (make deps installs Debian's systemd)")
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// directives returns the values of key in a unit's text, in order.
func directives(unit, key string) []string {
	var out []string
	for l := range strings.Lines(unit) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestService_Units generates the units for several configs, checks what each must say,
// and has systemd-analyze verify every one of them against the real binary.
func TestService_Units(t *testing.T) {
	exe := hookdedupBinary(t)
	sandbox := []string{
		"User=hookdedup", "Group=hookdedup", "StateDirectory=hookdedup", "WorkingDirectory=/var/lib/hookdedup",
		"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes", "UMask=0077",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "ProtectKernelTunables=yes", "ProtectControlGroups=yes",
		"LockPersonality=yes", "MemoryDenyWriteExecute=yes", "SystemCallFilter=@system-service",
	}
	lowPort := func(t *testing.T, unit string, want bool) {
		t.Helper()
		bound, ambient := directives(unit, "CapabilityBoundingSet"), directives(unit, "AmbientCapabilities")
		if want {
			if !slices.Equal(bound, []string{"CAP_NET_BIND_SERVICE"}) || !slices.Equal(ambient, []string{"CAP_NET_BIND_SERVICE"}) {
				t.Errorf("binding below 1024: CapabilityBoundingSet=%q AmbientCapabilities=%q, want CAP_NET_BIND_SERVICE alone", bound, ambient)
			}
		} else if !slices.Equal(bound, []string{""}) || len(ambient) != 0 || strings.Contains(unit, "CAP_") {
			t.Errorf("binding 1024 or above: CapabilityBoundingSet=%q AmbientCapabilities=%q, want no capability at all", bound, ambient)
		}
	}

	t.Run("NoConfig", func(t *testing.T) {
		files := generateUnits(t, exe)
		if len(files) != 1 {
			t.Fatalf("files %v, want hookdedup.service alone", slices.Sorted(maps.Keys(files)))
		}
		unit := files["hookdedup.service"]
		if got := directives(unit, "ExecStart"); !slices.Equal(got, []string{exe + " serve"}) {
			t.Errorf("ExecStart=%q, want %q", got, exe+" serve")
		}
		for _, d := range append(sandbox, "Restart=on-failure", "RestartSec=5s", "WantedBy=multi-user.target") {
			if !strings.Contains(unit, "\n"+d+"\n") {
				t.Errorf("unit lacks %s", d)
			}
		}
		if strings.Contains(unit, "ReadWritePaths") || strings.Contains(unit, "EnvironmentFile") {
			t.Errorf("a database in the state directory and no secret_env need neither ReadWritePaths nor EnvironmentFile:\n%s", unit)
		}
		lowPort(t, unit, false) // 127.0.0.1:8080
	})

	for _, c := range []struct {
		addr string
		low  bool
	}{
		{"0.0.0.0:443", true},
		{"[::]:80", true},
		{"127.0.0.1:1023", true},
		{"0.0.0.0:http", true},
		{"0.0.0.0:1024", false},
		{"127.0.0.1:8080", false},
	} {
		t.Run("Addr="+c.addr, func(t *testing.T) {
			cfg := writeConfig(t, "addr = \""+c.addr+"\"\n")
			unit := generateUnits(t, exe, "--config", cfg)["hookdedup.service"]
			if got := directives(unit, "ExecStart"); !slices.Equal(got, []string{exe + " serve --config " + cfg}) {
				t.Errorf("ExecStart=%q, want the binary, serve and the absolute config", got)
			}
			lowPort(t, unit, c.low)
		})
	}

	// The console's address counts as much as the public one.
	for _, c := range []struct {
		addr, console string
		low           bool
	}{
		{"0.0.0.0:8443", "10.8.0.1:443", true},
		{"0.0.0.0:443", "127.0.0.1:8081", true},
		{"0.0.0.0:8443", "127.0.0.1:8081", false},
	} {
		t.Run("ConsoleAddr="+c.console+",Addr="+c.addr, func(t *testing.T) {
			cfg := writeConfig(t, "addr = \""+c.addr+"\"\nconsole_addr = \""+c.console+"\"\n")
			lowPort(t, generateUnits(t, exe, "--config", cfg)["hookdedup.service"], c.low)
		})
	}

	// Beside HTTPS, plain HTTP listens on http_addr, :80 unless it says otherwise.
	for _, c := range []struct {
		name, toml string
		low        bool
	}{
		{"Files", "addr = \"0.0.0.0:8443\"\ntls_cert_file = \"/etc/hookdedup/cert.pem\"\ntls_key_file = \"/etc/hookdedup/key.pem\"\n", true},
		{"ACME", "addr = \"0.0.0.0:8443\"\nacme_domains = [\"hooks.example.com\"]\n", true},
		{"HTTPAddr", "addr = \"0.0.0.0:8443\"\nacme_domains = [\"hooks.example.com\"]\nhttp_addr = \"0.0.0.0:8080\"\n", false},
		{"ACMEOnStandardPorts", "addr = \"0.0.0.0:443\"\nacme_domains = [\"hooks.example.com\"]\nhttp_addr = \"0.0.0.0:8080\"\n", true},
	} {
		t.Run("HTTPS/"+c.name, func(t *testing.T) {
			lowPort(t, generateUnits(t, exe, "--config", writeConfig(t, c.toml))["hookdedup.service"], c.low)
		})
	}

	t.Run("FlagsOverConfig", func(t *testing.T) {
		// The config binds 8080, the flag 80: the flag wins in serve, so the unit
		// passes it on and grants the capability.
		dir := t.TempDir()
		cfg := writeConfig(t, "addr = \"127.0.0.1:8080\"\n")
		rel, err := filepath.Rel(mustGetwd(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		files := generateUnits(t, exe, "--config", rel, "--addr", "0.0.0.0:80", "--database", filepath.Join(dir, "hookdedup.db"),
			"--user", "webhooks", "--backup-timer", "--keep", "3")
		unit := files["hookdedup.service"]
		want := exe + " serve --config " + cfg + " --database " + filepath.Join(dir, "hookdedup.db") + " --addr 0.0.0.0:80"
		if got := directives(unit, "ExecStart"); !slices.Equal(got, []string{want}) {
			t.Errorf("ExecStart=%q, want %q", got, want)
		}
		lowPort(t, unit, true)
		backup := files["hookdedup-backup.service"]
		want = exe + " backup --config " + cfg + " --database " + filepath.Join(dir, "hookdedup.db") + " --keep 3 /var/lib/hookdedup/backups/"
		if got := directives(backup, "ExecStart"); !slices.Equal(got, []string{want}) {
			t.Errorf("backup ExecStart=%q, want %q", got, want)
		}
		// The backup never binds: no capability even when serve has one.
		lowPort(t, backup, false)
		for name, text := range map[string]string{"hookdedup.service": unit, "hookdedup-backup.service": backup} {
			if got := directives(text, "ReadWritePaths"); !slices.Equal(got, []string{dir}) {
				t.Errorf("%s: ReadWritePaths=%q, want the database's directory %s", name, got, dir)
			}
			if got := directives(text, "User"); !slices.Equal(got, []string{"webhooks"}) {
				t.Errorf("%s: User=%q, want webhooks", name, got)
			}
		}
		for _, d := range append(sandbox[2:], "Type=oneshot") {
			if !strings.Contains(backup, "\n"+d+"\n") {
				t.Errorf("backup service lacks %s", d)
			}
		}
		timer := files["hookdedup-backup.timer"]
		for _, d := range []string{"OnCalendar=daily", "Persistent=true", "RandomizedDelaySec=1h", "WantedBy=timers.target"} {
			if !strings.Contains(timer, "\n"+d+"\n") {
				t.Errorf("timer lacks %s:\n%s", d, timer)
			}
		}
	})

	t.Run("RelativeDatabase", func(t *testing.T) {
		// Relative to where the service runs, as serve reads it there.
		unit := generateUnits(t, exe, "--database", "data/hooks.db")["hookdedup.service"]
		if got := directives(unit, "ExecStart"); !slices.Equal(got, []string{exe + " serve --database /var/lib/hookdedup/data/hooks.db"}) {
			t.Errorf("ExecStart=%q", got)
		}
		if strings.Contains(unit, "ReadWritePaths") {
			t.Errorf("a database under the state directory needs no ReadWritePaths:\n%s", unit)
		}
	})

	t.Run("SecretEnv", func(t *testing.T) {
		cfg := writeConfig(t, "[[source]]\nname = \"ota\"\nsignature = \"stripe\"\nsecret_env = \"OTA_SECRET\"\n")
		unit := generateUnits(t, exe, "--config", cfg)["hookdedup.service"]
		if got := directives(unit, "EnvironmentFile"); !slices.Equal(got, []string{filepath.Join(filepath.Dir(cfg), "hookdedup.env")}) {
			t.Errorf("EnvironmentFile=%q, want hookdedup.env beside the config", got)
		}
		if !strings.Contains(unit, "OTA_SECRET") {
			t.Errorf("the unit does not name the variable the config reads:\n%s", unit)
		}
	})
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestService_Refuses checks that what would make a unit that cannot start, or that
// would carry a secret on its command line, is refused with an error naming it.
func TestService_Refuses(t *testing.T) {
	exe := hookdedupBinary(t)
	cfg := writeConfig(t, "")
	for _, c := range []struct {
		name   string
		exe    string
		hidden []string
		args   []string
		want   string
	}{
		{"BinaryHidden", "/home/ana/go/bin/hookdedup", sandboxHidden, nil,
			"the binary is /home/ana/go/bin/hookdedup, under /home, which the service's sandbox hides from it: install it as /usr/local/bin/hookdedup"},
		{"ConfigHidden", "/usr/local/bin/hookdedup", []string{filepath.Dir(cfg)}, []string{"--config", cfg},
			"the config file is " + cfg + ", under " + filepath.Dir(cfg) + ", which the service's sandbox hides from it: put it in /etc/hookdedup/"},
		{"DatabaseHidden", "/usr/local/bin/hookdedup", sandboxHidden, []string{"--database", "/root/hookdedup.db"},
			"the database is /root/hookdedup.db, under /root"},
		{"DatabaseURL", exe, nil, []string{"--database", "postgres://hookdedup:pw@db/hookdedup"},
			"--database: a database URL holds a password"},
		{"Space", "/opt/hook dedup/hookdedup", nil, nil, `the binary "/opt/hook dedup/hookdedup" contains ' '`},
		{"Percent", exe, nil, []string{"--database", "/srv/100%/h.db"}, `--database "/srv/100%/h.db" contains '%'`},
		{"KeepWithoutTimer", exe, nil, []string{"--keep", "3"}, "--keep applies to the backups of --backup-timer"},
		{"KeepZero", exe, nil, []string{"--backup-timer", "--keep", "0"}, "--keep 0: keep at least one backup"},
		{"User", exe, nil, []string{"--user", "Hook Dedup"}, `--user "Hook Dedup" is not a system user name`},
		{"Root", exe, nil, []string{"--user", "root"}, "--user root: the service runs as a user of its own"},
		{"Addr", exe, nil, []string{"--addr", "0.0.0.0:https-ish"}, `addr "0.0.0.0:https-ish": port "https-ish" is neither a number from 0 to 65535 nor a service name`},
		{"Positional", exe, nil, []string{"now"}, "usage: hookdedup service"},
		{"MetricsToken", exe, nil, []string{"--metrics-token", "0123456789abcdef0123"}, "--metrics-token: the unit file would show this secret"},
		{"ConsoleAddr", exe, nil, []string{"--console-addr", "10.8.0.1:console"}, `console_addr "10.8.0.1:console": port "console" is neither a number`},
		{"HTTPAddr", exe, nil, []string{"--acme-domains", "hooks.example.com", "--http-addr", "0.0.0.0:plain"}, `http_addr "0.0.0.0:plain": port "plain" is neither a number`},
		{"CertHidden", "/usr/local/bin/hookdedup", sandboxHidden, []string{"--tls-cert-file", "/home/ana/cert.pem", "--tls-key-file", "/etc/hookdedup/key.pem"},
			"tls_cert_file is /home/ana/cert.pem, under /home, which the service's sandbox hides from it: put it in /etc/hookdedup/"},
		{"KeyHidden", "/usr/local/bin/hookdedup", sandboxHidden, []string{"--tls-cert-file", "/etc/hookdedup/cert.pem", "--tls-key-file", "/tmp/key.pem"},
			"tls_key_file is /tmp/key.pem, under /tmp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &out, stderr: &out}
			err := serviceUnits(c.args, e, c.exe, c.hidden)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}

	// The built binary, started through a symlink: the unit names the file itself (not
	// the link, not os.Args[0]), and refuses it when it lies where the sandbox hides it.
	// The link keeps the name hookdedup: the test binary runs as main only under it.
	link := filepath.Join(t.TempDir(), "hookdedup")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	// exe may itself be a link (to the test binary): the unit names what it resolves to.
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(link, "service").CombinedOutput()
	hiddenDir := ""
	for _, h := range sandboxHidden {
		if within(exe, h) {
			hiddenDir = h
		}
	}
	if hiddenDir != "" {
		if err == nil || !strings.Contains(string(out), "the binary is "+exe+", under "+hiddenDir) {
			t.Fatalf("service from %s: %v\n%s", link, err, out)
		}
	} else if err != nil || !strings.Contains(string(out), "\nExecStart="+exe+" serve\n") {
		t.Fatalf("service from %s: %v\n%s", link, err, out)
	}
}

// TestBackup_Keep backs a real database up into a directory of backups and keeps the
// newest N there, leaving every other file alone.
func TestBackup_Keep(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateUser(context.Background(), storage.User{Name: "ana", Role: storage.RoleViewer, PasswordHash: "x"}, "test"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	backups := filepath.Join(dir, "backups")
	// Five older backups, real ones, with the names a directory backup gives.
	if err := os.MkdirAll(backups, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, day := range []string{"01", "02", "03", "04", "05"} {
		if out, code := cli(t, dir, nil, "", "backup", filepath.Join(backups, "hookdedup-202001"+day+"T020000Z.db")); code != 0 {
			t.Fatalf("backup: %d %s", code, out)
		}
	}
	others := []string{"notes.txt", "hookdedup-before-upgrade.db", "hookdedup-20200101T020000Z.db.bak"}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(backups, name), []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The copy a backup killed halfway left, an hour ago, under its own moment's name.
	left := filepath.Join(backups, ".hookdedup-20200106T020000Z.db.4242.tmp")
	if err := os.WriteFile(left, []byte("half a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(left, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}

	out, code := cli(t, dir, nil, "", "backup", "--keep", "3", backups+"/")
	if code != 0 {
		t.Fatalf("backup --keep 3: %d %s", code, out)
	}
	made := regexp.MustCompile(`backed up hookdedup.db to (\S+/hookdedup-\d{8}T\d{6}Z\.db): `).FindStringSubmatch(out)
	if made == nil || filepath.Dir(made[1]) != backups {
		t.Fatalf("backup into %s/ did not say where it wrote:\n%s", backups, out)
	}
	for _, day := range []string{"01", "02", "03"} {
		if !strings.Contains(out, "removed old backup "+filepath.Join(backups, "hookdedup-202001"+day+"T020000Z.db")+"\n") {
			t.Errorf("backup --keep 3 did not report removing the backup of 2020-01-%s:\n%s", day, out)
		}
	}
	want := append([]string{"hookdedup-20200104T020000Z.db", "hookdedup-20200105T020000Z.db", filepath.Base(made[1])}, others...)
	slices.Sort(want)
	if got := listDir(t, backups); !slices.Equal(got, want) {
		t.Fatalf("after backup --keep 3: %q, want %q", got, want)
	}
	// The new backup is a whole database.
	b, err := sqlite.Open(made[1], sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.CountUsers(context.Background()); err != nil || n != 1 {
		t.Errorf("the new backup holds %d users (%v), want 1", n, err)
	}
	b.Close()

	// An existing directory needs no slash; --keep 0 keeps everything.
	before := len(listDir(t, backups))
	if out, code := cli(t, dir, nil, "", "backup", "--keep", "0", backups); code != 0 || strings.Contains(out, "removed") {
		t.Fatalf("backup --keep 0: %d %s", code, out)
	}
	if got := listDir(t, backups); len(got) < before {
		t.Fatalf("backup --keep 0 removed files: %q", got)
	}
	// The default keeps 7; a new directory is made private.
	fresh := filepath.Join(dir, "new", "backups") + "/"
	if out, code := cli(t, dir, nil, "", "backup", fresh); code != 0 {
		t.Fatalf("backup into a new directory: %d %s", code, out)
	}
	if info, err := os.Stat(fresh); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("new backup directory: %v %v, want mode 0700", info, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep", "2", filepath.Join(dir, "one.db")}, "--keep applies to a directory of backups (DIR/), and " + filepath.Join(dir, "one.db") + " is a file"},
		{[]string{"--keep", "-1", backups}, "--keep -1: give a number of backups, or 0 to keep them all"},
	} {
		if out, code := cli(t, dir, nil, "", append([]string{"backup"}, c.args...)...); code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("backup %q: %d %s, want %q", c.args, code, out, c.want)
		}
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range entries {
		names = append(names, ent.Name())
	}
	return names
}

func TestPrivilegedPort(t *testing.T) {
	for addr, want := range map[string]bool{
		"0.0.0.0:443": true, "[::1]:80": true, ":1": true, "127.0.0.1:1023": true, "0.0.0.0:https": true,
		"127.0.0.1:1024": false, "127.0.0.1:0": false, ":8080": false,
	} {
		if got, err := privilegedPort(addr); err != nil || got != want {
			t.Errorf("privilegedPort(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	for _, addr := range []string{"8080", "127.0.0.1:port", ""} {
		if _, err := privilegedPort(addr); err == nil {
			t.Errorf("privilegedPort(%q) accepted it", addr)
		}
	}
}

// TestService_DatabaseOutsideItsReach: the service gets none of the caller's
// environment, so a database named by HOOKDEDUP_DATABASE is carried on serve's command
// line when it is a path, and refused when it is a URL (a password on a command line),
// rather than left behind, which would start the service on a new SQLite file of its
// own. A backup timer, which copies a SQLite file, is refused for PostgreSQL.
func TestService_DatabaseOutsideItsReach(t *testing.T) {
	pgConfig := writeConfig(t, `database = "postgres://hook:pw@db.example/hook"`+"\n")
	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // in the error, or in the units when wantErr is false
		wantErr bool
	}{
		{"URLFromEnvironment", map[string]string{"HOOKDEDUP_DATABASE": "postgres://hook:pw@db.example/hook"}, nil,
			"HOOKDEDUP_DATABASE: the service does not get this environment", true},
		{"PathFromEnvironment", map[string]string{"HOOKDEDUP_DATABASE": "/srv/hookdedup/h.db"}, nil,
			"ExecStart=/usr/local/bin/hookdedup serve --database /srv/hookdedup/h.db", false},
		{"FlagOverEnvironment", map[string]string{"HOOKDEDUP_DATABASE": "postgres://hook:pw@db.example/hook"},
			[]string{"--database", "/srv/hookdedup/h.db"}, "ExecStart=/usr/local/bin/hookdedup serve --database /srv/hookdedup/h.db", false},
		{"BackupTimerPostgres", nil, []string{"--config", pgConfig, "--backup-timer"}, "back a PostgreSQL database up with pg_dump", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			e := env{getenv: func(k string) string { return c.env[k] }, stdin: strings.NewReader(""), stdout: &out, stderr: &out}
			err := serviceUnits(c.args, e, "/usr/local/bin/hookdedup", nil)
			switch {
			case c.wantErr && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one containing %q\n%s", err, c.want, out.String())
			case !c.wantErr && (err != nil || !strings.Contains(out.String(), c.want)):
				t.Fatalf("error %v; want units with %q:\n%s", err, c.want, out.String())
			}
			if strings.Contains(out.String(), "pw@") {
				t.Errorf("the units show the database's password:\n%s", out.String())
			}
		})
	}
}

// TestService_CarriesEnvironment: systemd gives the service none of the environment
// "hookdedup service" ran in, yet its checks (the capability for a low port, the
// sandbox's reach) use every HOOKDEDUP_* setting. Each is therefore carried onto serve's
// command line: serve, started by the unit with no environment at all, must load the
// configuration the command checked. HOOKDEDUP_ADDR=0.0.0.0:443 alone once gave a unit
// that could bind 443 and a serve on 127.0.0.1:8080.
func TestService_CarriesEnvironment(t *testing.T) {
	exe := hookdedupBinary(t)
	cfgFile := writeConfig(t, "addr = \"127.0.0.1:8080\"\nlog_level = \"warn\"\n")
	common := map[string]string{
		"HOOKDEDUP_ADDR":                "0.0.0.0:443",
		"HOOKDEDUP_CONSOLE_ADDR":        "127.0.0.1:8081",
		"HOOKDEDUP_DATABASE":            "/srv/hookdedup/h.db",
		"HOOKDEDUP_RETENTION":           "240h",
		"HOOKDEDUP_REMEMBER":            "1000h",
		"HOOKDEDUP_STUCK_AFTER":         "15m",
		"HOOKDEDUP_SESSION_IDLE":        "1h",
		"HOOKDEDUP_SESSION_MAX":         "8h",
		"HOOKDEDUP_READ_HEADER_TIMEOUT": "5s",
		"HOOKDEDUP_READ_TIMEOUT":        "20s",
		"HOOKDEDUP_WRITE_TIMEOUT":       "40s",
		"HOOKDEDUP_IDLE_TIMEOUT":        "90s",
		"HOOKDEDUP_MAX_BODY":            "2097152",
		"HOOKDEDUP_SYNCHRONOUS":         "NORMAL",
		"HOOKDEDUP_CACHE_SIZE":          "33554432",
		"HOOKDEDUP_MMAP_SIZE":           "0",
		"HOOKDEDUP_LOG_LEVEL":           "debug",
		"HOOKDEDUP_TRUSTED_PROXIES":     "10.0.0.0/8,192.168.1.0/24",
		"HOOKDEDUP_CONSOLE_NAMES":       "hookdedup.corp.example.com,box.tail1234.ts.net",
	}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(common)
		maps.Copy(m, extra)
		return m
	}
	// HTTPS from files and from ACME exclude each other: one environment each.
	environs := map[string]map[string]string{
		"Files": with(map[string]string{"HOOKDEDUP_TLS_CERT_FILE": "/etc/hookdedup/cert.pem", "HOOKDEDUP_TLS_KEY_FILE": "/etc/hookdedup/key.pem"}),
		"ACME": with(map[string]string{"HOOKDEDUP_ACME_DOMAINS": "hooks.example.com", "HOOKDEDUP_ACME_EMAIL": "ops@example.com",
			"HOOKDEDUP_ACME_DIRECTORY": "https://acme-staging-v02.api.letsencrypt.org/directory", "HOOKDEDUP_HTTP_ADDR": "0.0.0.0:8080"}),
	}
	// Every setting but the secret, which is refused (TestService_SecretFromEnvironment):
	// a setting added later must be added here, and so be checked to reach the service.
	var cfg config
	for _, s := range cfg.settings() {
		name := "HOOKDEDUP_" + strings.ToUpper(s.name)
		if s.name != "metrics_token" && environs["Files"][name] == "" && environs["ACME"][name] == "" {
			t.Errorf("%s is in no environment of this test", name)
		}
	}
	none := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	for name, environ := range environs {
		t.Run(name, func(t *testing.T) {
			// What the command checked: the file, under this environment.
			e := env{getenv: func(k string) string { return environ[k] }, stdout: io.Discard, stderr: io.Discard}
			checked := newFlags("service", e)
			if _, err := checked.parse([]string{"--config", cfgFile}); err != nil {
				t.Fatal(err)
			}
			want, err := checked.load(e)
			if err != nil {
				t.Fatal(err)
			}
			if want.Addr != "0.0.0.0:443" || want.LogLevel != "debug" {
				t.Fatalf("the environment does not override the file: addr %q, log_level %q", want.Addr, want.LogLevel)
			}

			unit := generateUnitsEnv(t, exe, environ, "--config", cfgFile)["hookdedup.service"]
			execStart := directives(unit, "ExecStart")
			if len(execStart) != 1 || !strings.HasPrefix(execStart[0], exe+" serve ") {
				t.Fatalf("ExecStart=%q, want one: %s serve …", execStart, exe)
			}
			if strings.Contains(execStart[0], "--metrics-token") {
				t.Errorf("ExecStart carries a metrics token: %s", execStart[0])
			}
			// What the service runs: serve's flags alone, in an empty environment.
			served := newFlags("serve", none)
			pos, err := served.parse(strings.Fields(strings.TrimPrefix(execStart[0], exe+" serve ")))
			if err != nil || len(pos) != 0 {
				t.Fatalf("serve's command line %q: %v (arguments %q)", execStart[0], err, pos)
			}
			got, err := served.load(none)
			if err != nil {
				t.Fatalf("serve's command line %q: %v", execStart[0], err)
			}
			// Where each setting was set (a flag there, a variable here) is no part of
			// the configuration.
			got.origin, want.origin = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the service runs another configuration than the one checked:\nExecStart=%s\nserve:   %+v\nchecked: %+v", execStart[0], got, want)
			}
			if !slices.Equal(directives(unit, "AmbientCapabilities"), []string{"CAP_NET_BIND_SERVICE"}) {
				t.Errorf("HOOKDEDUP_ADDR=0.0.0.0:443: the unit cannot bind 443:\n%s", unit)
			}
			if got := directives(unit, "ReadWritePaths"); !slices.Equal(got, []string{"/srv/hookdedup"}) {
				t.Errorf("ReadWritePaths=%q, want the directory of HOOKDEDUP_DATABASE", got)
			}
		})
	}

	// A flag given to service wins over the variable, as it would in serve.
	unit := generateUnitsEnv(t, exe, map[string]string{"HOOKDEDUP_ADDR": "0.0.0.0:443"}, "--addr", "127.0.0.1:9090")["hookdedup.service"]
	if got := directives(unit, "ExecStart"); !slices.Equal(got, []string{exe + " serve --addr 127.0.0.1:9090"}) {
		t.Errorf("ExecStart=%q, want the flag's address alone", got)
	}
	if strings.Contains(unit, "CAP_NET_BIND_SERVICE") {
		t.Errorf("the flag's 9090 needs no capability:\n%s", unit)
	}
}

// TestService_SecretFromEnvironment: a secret set in the environment is neither carried
// onto the unit's command line, which every user of the machine can read, nor dropped,
// which would run a serve without the token the command checked (and /metrics open on
// console_addr): it is refused, naming the variable and where the secret goes instead.
func TestService_SecretFromEnvironment(t *testing.T) {
	var out bytes.Buffer
	const token = "0123456789abcdef0123456789abcdef"
	environ := map[string]string{"HOOKDEDUP_METRICS_TOKEN": token, "HOOKDEDUP_CONSOLE_ADDR": "127.0.0.1:8081"}
	e := env{getenv: func(k string) string { return environ[k] }, stdin: strings.NewReader(""), stdout: &out, stderr: &out}
	err := serviceUnits(nil, e, "/usr/local/bin/hookdedup", nil)
	if err == nil || !strings.Contains(err.Error(), "HOOKDEDUP_METRICS_TOKEN") || !strings.Contains(err.Error(), "set metrics_token in the config file") {
		t.Fatalf("error %v, want one naming HOOKDEDUP_METRICS_TOKEN and the config file\n%s", err, out.String())
	}
	if strings.Contains(err.Error()+out.String(), token) {
		t.Errorf("the token is shown: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "ExecStart") {
		t.Errorf("units were printed despite the refusal:\n%s", out.String())
	}
}

// TestService_WriteMissingDirectory: --write into a directory that is not there names
// that directory, not the temporary file a unit is written through.
func TestService_WriteMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such")
	e := env{getenv: func(string) string { return "" }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	err := serviceUnits([]string{"--write", missing}, e, "/usr/local/bin/hookdedup", nil)
	if err == nil || !strings.Contains(err.Error(), "--write "+missing+": not a directory") || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("service --write %s: %v, want the directory named", missing, err)
	}
}

// TestService_StopTimeoutCoversTheDrain: with read_timeout raised for slow links (2m),
// a stop drains requests in flight for up to 2m10s; the unit's TimeoutStopSec is past
// that, so systemd does not kill serve mid-stop at its default of 90 s.
func TestService_StopTimeoutCoversTheDrain(t *testing.T) {
	exe := hookdedupBinary(t)
	cfg := writeConfig(t, "read_timeout = \"2m\"\n"+openSource)
	unit := generateUnits(t, exe, "--config", cfg)["hookdedup.service"]
	got := directives(unit, "TimeoutStopSec")
	if len(got) == 0 {
		t.Fatalf("the unit sets no TimeoutStopSec\n%s", unit)
	}
	d, err := time.ParseDuration(got[len(got)-1])
	if err != nil || d < 130*time.Second {
		t.Errorf("TimeoutStopSec=%q, want at least the drain, 2m10s", got)
	}
}
