package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The service's fixed places: systemd creates the state directory (StateDirectory=) for
// the service's user and the service runs there, so a relative database lands in it.
const (
	serviceStateDir  = "/var/lib/hookdedup"
	serviceBackupDir = serviceStateDir + "/backups/"
	defaultKeep      = 7
)

// sandboxHidden are the directories the unit's sandbox hides from the service:
// ProtectHome=yes hides the first three, PrivateTmp=yes replaces the last two. A binary,
// config or database there would be missing when the service starts.
var sandboxHidden = []string{"/home", "/root", "/run/user", "/tmp", "/var/tmp"}

// runService prints, or with --write writes, the systemd units that run this binary's
// serve as a hardened service, and with --backup-timer a daily backup.
func runService(ctx context.Context, args []string, e env) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("service: where is this binary: %w", err)
	}
	// The unit must name the file itself, not a symlink that may later point elsewhere
	// or into a directory the sandbox hides. Linux's answer is already resolved
	// (/proc/self/exe); other systems may give the symlink.
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("service: where is this binary: %w", err)
	}
	return serviceUnits(args, e, exe, sandboxHidden)
}

// serviceUnits is runService for the binary exe, refusing paths under hidden.
func serviceUnits(args []string, e env, exe string, hidden []string) error {
	flags := newFlags("service", e)
	backupTimer := flags.fs.Bool("backup-timer", false, "also a timer that backs the database up daily into "+serviceBackupDir)
	keep := flags.fs.Int("keep", defaultKeep, "with --backup-timer: how many daily backups to keep")
	user := flags.fs.String("user", "hookdedup", "the system user (and group) the service runs as")
	write := flags.fs.String("write", "", "write the unit files into `DIR` (e.g. /etc/systemd/system) instead of printing them")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem("service", nil, pos, false); p != "" {
		return errors.New(p + "\nusage: hookdedup service [--backup-timer] [--keep N] [--config F] [--database D] [--user U] [--write DIR]")
	}
	keepSet := false
	flags.fs.Visit(func(f *flag.Flag) { keepSet = keepSet || f.Name == "keep" })
	if keepSet && !*backupTimer {
		return errors.New("--keep applies to the backups of --backup-timer")
	}
	if *keep < 1 {
		return fmt.Errorf("--keep %d: keep at least one backup", *keep)
	}
	if !validUser.MatchString(*user) {
		return fmt.Errorf("--user %q is not a system user name (lower-case letters, digits, - and _, starting with a letter or _)", *user)
	}
	if *user == "root" {
		return errors.New("--user root: the service runs as a user of its own, which can reach nothing but its own files")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}

	u := unitSpec{Exe: exe, User: *user, BackupTimer: *backupTimer, Keep: *keep, StopTimeout: stopTimeout(cfg)}
	if err := plainPath("the binary", exe, "install it as /usr/local/bin/hookdedup and run that", hidden); err != nil {
		return err
	}
	if cfg.File != "" {
		if u.Config, err = filepath.Abs(cfg.File); err != nil {
			return err
		}
		if err := plainPath("the config file", u.Config, "put it in /etc/hookdedup/", hidden); err != nil {
			return err
		}
		for _, s := range cfg.Sources {
			if s.SecretEnv != "" {
				// systemd gives a service none of the caller's environment: the
				// variables come from a file beside the config.
				u.EnvFile = filepath.Join(filepath.Dir(u.Config), "hookdedup.env")
				u.SecretEnvs = append(u.SecretEnvs, s.SecretEnv)
			}
		}
	}
	// systemd gives the service none of this environment, yet the checks below ran on
	// it: every setting taken from a HOOKDEDUP_* variable is carried to serve as its
	// flag, as a flag given here is, or the service would run on other settings than
	// those checked (HOOKDEDUP_ADDR=0.0.0.0:443 would grant the capability to bind 443
	// to a serve listening on 127.0.0.1:8080, and a database named there would be a new
	// SQLite file of its own). A flag given here wins over the variable, as in serve.
	given := map[string]string{} // each setting to carry: how it was given, for errors
	for _, s := range cfg.settings() {
		variable := "HOOKDEDUP_" + strings.ToUpper(s.name)
		if _, ok := flags.overrides[s.name]; ok {
			given[s.name] = "--" + strings.ReplaceAll(s.name, "_", "-")
		} else if v := e.getenv(variable); v != "" {
			flags.overrides[s.name] = v
			given[s.name] = variable
		}
	}
	// Every setting given here is handed to serve as given here, so that the unit runs
	// what was asked for and checked; the database as an absolute path, since serve runs
	// elsewhere. A secret is refused, not carried: the unit file and serve's command line
	// are readable by every user of the machine. Nor is it written to an environment
	// file: the one the unit may name is the operator's, holding the sources' secrets;
	// and it is not dropped either, which for metrics_token would leave /metrics open on
	// console_addr.
	for _, s := range cfg.settings() {
		v, ok := flags.overrides[s.name]
		if !ok {
			continue
		}
		what, fromEnv := given[s.name], strings.HasPrefix(given[s.name], "HOOKDEDUP_")
		if s.name == "metrics_token" {
			if fromEnv {
				return errors.New("HOOKDEDUP_METRICS_TOKEN: the service does not get this environment, and the unit file would show this secret " +
					"to every user of the machine: set metrics_token in the config file (readable by the service's user alone) and unset HOOKDEDUP_METRICS_TOKEN")
			}
			return errors.New("--metrics-token: the unit file would show this secret to every user of the machine: set metrics_token in the config file instead")
		}
		if s.name == "database" {
			if isPostgres(v) {
				if fromEnv {
					return errors.New("HOOKDEDUP_DATABASE: the service does not get this environment, and a database URL holds a password, " +
						"which must not stand on its command line: set database in the config file and unset HOOKDEDUP_DATABASE")
				}
				return errors.New("--database: a database URL holds a password, which must not stand on a command line: set database in the config file")
			}
			if !filepath.IsAbs(v) {
				v = filepath.Join(serviceStateDir, v)
			}
			u.Database = v
		}
		if err := plainArg(what, v); err != nil {
			return err
		}
		if s.name != "database" {
			u.Overrides = append(u.Overrides, "--"+strings.ReplaceAll(s.name, "_", "-"), v)
		}
	}
	if *backupTimer && isPostgres(cfg.Database) {
		return errors.New("--backup-timer backs up a SQLite database file; back a PostgreSQL database up with pg_dump")
	}
	if !isPostgres(cfg.Database) {
		db := cfg.Database
		if !filepath.IsAbs(db) {
			db = filepath.Join(serviceStateDir, db)
		}
		if err := plainPath("the database", db, "leave it in "+serviceStateDir, hidden); err != nil {
			return err
		}
		// ProtectSystem=strict leaves only the state directory writable; SQLite writes
		// its -wal and -shm beside the database, so its whole directory must be.
		if dir := filepath.Dir(db); !within(dir, serviceStateDir) {
			u.WritableDir = dir
		}
	}
	// serve reads the certificate files from inside the sandbox, where it runs in the
	// state directory.
	for _, f := range []struct{ setting, path string }{{"tls_cert_file", cfg.TLSCertFile}, {"tls_key_file", cfg.TLSKeyFile}} {
		if f.path == "" {
			continue
		}
		path := f.path
		if !filepath.IsAbs(path) {
			path = filepath.Join(serviceStateDir, path)
		}
		if err := plainPath(f.setting, path, "put it in /etc/hookdedup/, readable by the service's user", hidden); err != nil {
			return err
		}
	}
	for _, l := range listenAddrs(cfg) {
		low, err := privilegedPort(l.addr)
		if err != nil {
			return fmt.Errorf("%s %w", l.setting, err)
		}
		u.Privileged = u.Privileged || low
	}

	files := u.files()
	if *write == "" {
		var units strings.Builder
		for i, f := range files {
			if i > 0 {
				units.WriteString("\n")
			}
			units.WriteString(f.text)
		}
		// Redirected into /etc/systemd/system on a full disk, a unit cut short would
		// otherwise be left there with exit 0, for systemd to run as it is.
		if _, err := io.WriteString(e.stdout, units.String()); err != nil {
			return fmt.Errorf("print the units: %w", err)
		}
		return nil
	}
	// Named as given, not as the temporary file beside a unit: a typo in the directory
	// is the likely cause.
	if fi, err := os.Stat(*write); err != nil || !fi.IsDir() {
		return fmt.Errorf("--write %s: not a directory (systemd reads units from /etc/systemd/system)", *write)
	}
	var names []string
	for _, f := range files {
		path := filepath.Join(*write, f.name)
		if err := writeFileAtomic(path, []byte(f.text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", path)
		if f.enable {
			names = append(names, f.name)
		}
	}
	fmt.Fprintf(e.stdout, "now: systemctl daemon-reload && systemctl enable --now %s\n", strings.Join(names, " "))
	if u.EnvFile != "" {
		fmt.Fprintf(e.stdout, "the sources read %s from the environment: set them in %s (owner root, mode 0600)\n",
			strings.Join(u.SecretEnvs, ", "), u.EnvFile)
	}
	return nil
}

// listenAddrs are the addresses serve binds (addr, console_addr, and http_addr when
// HTTPS is on): each decides whether the unit grants the capability to bind a port below
// 1024.
func listenAddrs(cfg config) []struct{ setting, addr string } {
	out := []struct{ setting, addr string }{{"addr", cfg.Addr}}
	if cfg.ConsoleAddr != "" {
		out = append(out, struct{ setting, addr string }{"console_addr", cfg.ConsoleAddr})
	}
	if s := cfg.tls(); s.enabled() {
		// Beside HTTPS, plain HTTP listens too: on :80 unless http_addr says otherwise.
		out = append(out, struct{ setting, addr string }{"http_addr", s.httpAddr()})
	}
	return out
}

// privilegedPort reports whether addr (host:port) binds a port below 1024, which a
// process that is not root may only do with CAP_NET_BIND_SERVICE. Its errors begin with
// the quoted address, for the caller to put the setting's name before.
func privilegedPort(addr string) (bool, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%q: %w", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		if n, err = net.LookupPort("tcp", port); err != nil {
			return false, fmt.Errorf("%q: %q is not a port", addr, port)
		}
	}
	return n > 0 && n < 1024, nil
}

// validUser is what useradd accepts for a system user, without the odd corners.
var validUser = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// plainArg refuses a value that a unit file would have to quote or escape: systemd splits
// command lines on spaces, unquotes, and expands % specifiers and $VARIABLES. Refusing
// keeps the unit readable and its meaning obvious.
func plainArg(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`"'\$%;`, r) {
			return fmt.Errorf("%s %q contains %q, which a systemd unit would need to quote or escape: choose a plainer name", what, v, r)
		}
	}
	return nil
}

// plainPath is plainArg for an absolute path that the service must be able to reach;
// hint says where it belongs instead.
func plainPath(what, path, hint string, hidden []string) error {
	if err := plainArg(what, path); err != nil {
		return err
	}
	for _, h := range hidden {
		if within(path, h) {
			return fmt.Errorf("%s is %s, under %s, which the service's sandbox hides from it: %s", what, path, h, hint)
		}
	}
	return nil
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// unitSpec is what the units say: everything already checked and absolute.
type unitSpec struct {
	Exe         string
	Config      string   // "" when there is no config file
	Overrides   []string // settings other than the database given to service, by flag or HOOKDEDUP_*, as serve's flags
	Database    string   // the database given by flag or HOOKDEDUP_DATABASE, absolute; "" when the config says
	WritableDir string   // the database's directory when outside the state directory
	EnvFile     string   // the environment file for secret_env, "" when none is read
	SecretEnvs  []string // the variables it must hold
	User        string
	Privileged  bool // serve binds a port below 1024
	BackupTimer bool
	Keep        int
	StopTimeout time.Duration // the longest a stop of serve takes on this configuration
}

// stopMargin is what a stop takes after the drain and the store of the rejection
// counts: the background loops end (the alerts store their state, up to 5 s) and the
// database closes (SQLite checkpoints its write-ahead log).
const stopMargin = 30 * time.Second

// stopTimeout is the unit's TimeoutStopSec for cfg: the drain its timeouts give, the
// store of the last rejection counts, the longest hand-off, and stopMargin. systemd
// kills serve past it. The dispatcher hands events off until the drain is over, and the
// stop waits for the attempts then under way: killed mid-attempt, serve would leave
// the event to be sent again.
func stopTimeout(cfg config) time.Duration {
	var attempt time.Duration
	for _, s := range cfg.Sources {
		if s.ForwardURL != "" && s.AttemptTimeout != nil {
			attempt = max(attempt, *s.AttemptTimeout)
		}
	}
	return drainTimeout(cfg) + flushTimeout + attempt + stopMargin
}

// unitFile is one file of the output.
type unitFile struct {
	name, text string
	enable     bool // started by systemctl enable --now (the backup service is the timer's)
}

func (u unitSpec) files() []unitFile {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }

	line("# file: hookdedup.service")
	line("# The hookdedup server (\"hookdedup serve\") as a hardened service, written by")
	line("# \"hookdedup service\" (version %s): generate it again rather than edit it.", version)
	line("[Unit]")
	line("Description=hookdedup: exactly-once webhook intake")
	line("Wants=network-online.target")
	line("# After the clock is synchronised, where the machine has a service that says so")
	line("# (systemd-timesyncd, chrony): times stored and compared with other replicas'")
	line("# stay right from the first delivery.")
	line("After=network-online.target time-sync.target")
	line("")
	line("[Service]")
	line("Type=exec")
	serve := append(append([]string{u.Exe, "serve"}, u.configArgs()...), u.Overrides...)
	line("ExecStart=%s", strings.Join(serve, " "))
	if u.EnvFile != "" {
		line("# The config reads %s from the environment: set it in this file (owner root,", strings.Join(u.SecretEnvs, ", "))
		line("# mode 0600: systemd reads it before it becomes %s).", u.User)
		line("EnvironmentFile=%s", u.EnvFile)
	}
	line("Restart=on-failure")
	line("RestartSec=5s")
	line("# A stop finishes the requests in flight for as long as the configured timeouts")
	line("# let one take, then closes the database: systemd's default of 90 s may be less.")
	line("TimeoutStopSec=%ds", int((u.StopTimeout+time.Second-1)/time.Second))
	u.sandbox(line, u.Privileged)
	line("")
	line("[Install]")
	line("WantedBy=multi-user.target")
	files := []unitFile{{name: "hookdedup.service", text: b.String(), enable: true}}
	if !u.BackupTimer {
		return files
	}

	b.Reset()
	line("# file: hookdedup-backup.service")
	line("# A consistent copy of the live hookdedup database into %s, keeping the", serviceBackupDir)
	line("# newest %d; started by hookdedup-backup.timer. Written by \"hookdedup service\".", u.Keep)
	line("[Unit]")
	line("Description=hookdedup: back up the database")
	line("")
	line("[Service]")
	line("Type=oneshot")
	backup := append([]string{u.Exe, "backup"}, u.configArgs()...)
	backup = append(backup, "--keep", strconv.Itoa(u.Keep), serviceBackupDir)
	line("ExecStart=%s", strings.Join(backup, " "))
	line("Nice=10")
	line("IOSchedulingClass=idle")
	u.sandbox(line, false)
	files = append(files, unitFile{name: "hookdedup-backup.service", text: b.String()})

	b.Reset()
	line("# file: hookdedup-backup.timer")
	line("# Runs hookdedup-backup.service once a day. Written by \"hookdedup service\".")
	line("[Unit]")
	line("Description=hookdedup: daily database backup")
	line("")
	line("[Timer]")
	line("OnCalendar=daily")
	line("# A machine that was off at midnight backs up when it starts; the delay keeps")
	line("# machines that share a disk or a host from all starting at once.")
	line("Persistent=true")
	line("RandomizedDelaySec=1h")
	line("")
	line("[Install]")
	line("WantedBy=timers.target")
	return append(files, unitFile{name: "hookdedup-backup.timer", text: b.String(), enable: true})
}

// configArgs are the flags that point a command at the service's config and database.
func (u unitSpec) configArgs() []string {
	var args []string
	if u.Config != "" {
		args = append(args, "--config", u.Config)
	}
	if u.Database != "" {
		args = append(args, "--database", u.Database)
	}
	return args
}

// sandbox writes what both services share: who they run as, where, and the hardening.
// Only a service that binds a port below 1024 keeps one capability, to do that.
func (u unitSpec) sandbox(line func(string, ...any), bindLow bool) {
	line("")
	line("# A dedicated system user, not DynamicUser=: the CLI (user, keys, release, backup,")
	line("# restore) must open the same database as the same user, with sudo -u %s.", u.User)
	line("User=%s", u.User)
	line("Group=%s", u.User)
	line("StateDirectory=hookdedup")
	line("StateDirectoryMode=0700")
	line("WorkingDirectory=%s", serviceStateDir)
	if u.WritableDir != "" {
		line("ReadWritePaths=%s", u.WritableDir)
	}
	line("UMask=0077")
	line("")
	if bindLow {
		line("# It listens on a port below 1024: that one capability, nothing else.")
		line("CapabilityBoundingSet=CAP_NET_BIND_SERVICE")
		line("AmbientCapabilities=CAP_NET_BIND_SERVICE")
	} else {
		line("CapabilityBoundingSet=")
	}
	line("NoNewPrivileges=yes")
	line("ProtectSystem=strict")
	line("ProtectHome=yes")
	line("PrivateTmp=yes")
	line("PrivateDevices=yes")
	line("PrivateMounts=yes")
	line("ProtectKernelTunables=yes")
	line("ProtectKernelModules=yes")
	line("ProtectKernelLogs=yes")
	line("ProtectControlGroups=yes")
	line("ProtectClock=yes")
	line("ProtectHostname=yes")
	line("ProtectProc=invisible")
	line("RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX")
	line("RestrictNamespaces=yes")
	line("RestrictRealtime=yes")
	line("RestrictSUIDSGID=yes")
	line("LockPersonality=yes")
	line("# Neither Go nor SQLite (cgo) maps memory writable and executable.")
	line("MemoryDenyWriteExecute=yes")
	line("RemoveIPC=yes")
	line("SystemCallArchitectures=native")
	line("SystemCallFilter=@system-service")
	line("SystemCallFilter=~@privileged")
	line("SystemCallErrorNumber=EPERM")
}

// writeFileAtomic writes data to path through a temporary file beside it, so that
// systemd never reads half a unit. The file is flushed before the rename and the
// directory after it: a power cut would otherwise leave an empty unit in its place.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename; cleans up after a failure
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
