// Command hookdedup receives webhooks, deduplicates them by idempotency key in SQLite and
// hands each event downstream once. See README.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/hookdedup/hookdedup/storage"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	// A write to a pipe whose reader is gone fails with EPIPE instead of killing the
	// process: token add then revokes the token it could not show, a command says its
	// output was lost, and serve, its log piped to a tee that Ctrl-C ended first, still
	// finishes the requests in flight and closes the database. Notified rather than
	// ignored: an ignored signal stays ignored in the programs serve starts (a browser).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	if errors.Is(err, errReaderGone) {
		os.Exit(128 + int(syscall.SIGPIPE))
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	// Like a usage error: the command was not run at all, and a script can tell.
	var none noDatabaseError
	if errors.As(err, &none) {
		fmt.Fprintln(os.Stderr, "hookdedup:", none)
		os.Exit(2)
	}
	var unchecked auditUncheckedError
	if errors.As(err, &unchecked) {
		fmt.Fprintln(os.Stderr, "hookdedup:", unchecked)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookdedup:", err)
		os.Exit(1)
	}
}

const usage = `usage: hookdedup <command> [flags]

commands:
  serve     receive webhooks and serve the console
  user      add, list, change or remove console users (passwords from stdin)
  key       print the key a payload gets and how it was derived
  sources   print each source's effective settings: the preset's, the defaults (secrets masked)
  release   release a key, or reprocess its event
  keys      list keys (--stuck: the stuck ones)
  token     add, list or revoke API bearer tokens
  demo      send realistic signed OTA traffic to a running server
  backup    write a consistent copy of the live database to FILE, or into DIR/ (keeping --keep)
  restore   replace the database with a backup FILE (serve stopped; --copy: as a database of its own)
  audit     verify the audit log's hash chain, or export the log with its hashes
  migrate   copy the SQLite database into an empty PostgreSQL database (--to URL)
  service   print the hardened systemd unit that runs serve (--backup-timer, --write DIR)
  version   print the version

Every command takes --config and --database; "hookdedup help <command>" prints its flags.
`

// env is what every command gets from main.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	if args[0] == "serve" {
		// serve runs on after its first lines, and says itself what a lost one means
		// (the first admin's password).
		return runServe(ctx, args[1:], env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr})
	}
	out := &checkedWriter{w: stdout}
	err := runCommand(ctx, args, env{getenv: getenv, stdin: stdin, stdout: out, stderr: stderr})
	werr := out.failed()
	if werr != nil && isOutputError(err) {
		// The command gave back the write that failed as it is (a table's Flush): that
		// is the failure werr names, said below with the command's name, not a bare
		// "write /dev/stdout: …" that leaves the operator guessing which command it was
		// and whether it did its work.
		err = nil
	}
	if errors.Is(werr, syscall.EPIPE) && readsOnly(args) && (err == nil || errors.Is(err, syscall.EPIPE)) {
		return errReaderGone
	}
	if err == nil && werr != nil && readsOnly(args) {
		return fmt.Errorf("%s: its output could not be written to stdout (%w)", commandName(args), werr)
	}
	if err == nil && werr != nil {
		// What the command did is done (a backup written, a password set, a key
		// released): the operator did not see it said, and a script must not take the
		// exit status for a success it could not report.
		return fmt.Errorf("%s ran, but its output could not be written to stdout (%w): whatever it changed is changed; check that before running it again",
			commandName(args), werr)
	}
	return err
}

// errReaderGone is the end of a command that only reads whose output's reader stopped
// reading (`hookdedup keys | head`): that reader has what it wanted, and nothing
// changed, so main exits without a word, with the status a shell gives a process that
// SIGPIPE ended.
var errReaderGone = errors.New("the reader of the output stopped reading")

// readsOnly reports whether the command args run changes nothing: a list, a look.
func readsOnly(args []string) bool {
	switch commandName(args) {
	case "keys", "key", "sources", "user list", "token list", "audit verify", "audit export",
		"version", "--version", "-version", "help", "-h", "--help":
		return true
	}
	return false
}

// checkedWriter keeps the first error of a write to w.
type checkedWriter struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		return n, outputError{err}
	}
	return n, err
}

// outputError is an error of a write to stdout, marked so that run can tell a command
// that returned it unwrapped from one that failed otherwise, or that said itself what
// the lost output means (token add revokes the token it could not show).
type outputError struct{ err error }

func (o outputError) Error() string { return o.err.Error() }
func (o outputError) Unwrap() error { return o.err }

// isOutputError reports whether err is a write to stdout that failed, returned as it is.
func isOutputError(err error) bool {
	_, ok := err.(outputError)
	return ok
}

func (c *checkedWriter) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// commandName is the command args run, with its subcommand where it has one
// ("user password").
func commandName(args []string) string {
	switch args[0] {
	case "user", "token", "audit":
		if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			return args[0] + " " + args[1]
		}
	}
	return args[0]
}

// runCommand runs every command but serve.
func runCommand(ctx context.Context, args []string, e env) error {
	stdout, stderr := e.stdout, e.stderr
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "user":
		return runUser(ctx, rest, e)
	case "key":
		return runKey(ctx, rest, e)
	case "sources":
		return runSources(ctx, rest, e)
	case "release":
		return runRelease(ctx, rest, e)
	case "keys":
		return runKeys(ctx, rest, e)
	case "token":
		return runToken(ctx, rest, e)
	case "demo":
		return runDemo(ctx, rest, e)
	case "backup":
		return runBackup(ctx, rest, e)
	case "restore":
		return runRestore(ctx, rest, e)
	case "service":
		return runService(ctx, rest, e)
	case "audit":
		return runAudit(ctx, rest, e)
	case "migrate":
		return runMigrate(ctx, rest, e)
	case "version", "--version", "-version":
		if err := versionArgs(cmd, rest, e); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "hookdedup", version)
		return nil
	case "help", "-h", "--help":
		return runHelp(ctx, rest, e)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w %q", errUnknownCommand, cmd)
	}
}

// versionArgs checks version's command line: the flags every command takes (--config,
// --database, the top-level settings), so that a wrapper that adds them to whatever it
// runs can ask for the version too, and nothing else. The version needs none of them:
// neither the file nor the database is read.
func versionArgs(cmd string, args []string, e env) error {
	pos, err := newFlags("version", e).parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem(cmd, nil, pos, false); p != "" {
		return errors.New(p)
	}
	return nil
}

// errUnknownCommand is the refusal of a command hookdedup does not have.
var errUnknownCommand = errors.New("unknown command")

// runHelp prints the general usage, or with a command's name (help keys) what that
// command's -h prints: its flags, or its subcommands. Help was asked for, so it goes to
// stdout, and it succeeds.
func runHelp(ctx context.Context, args []string, e env) error {
	switch {
	case len(args) == 0, args[0] == "help", args[0] == "version":
		// Their lines in the general usage are all there is to say of them.
		fmt.Fprint(e.stdout, usage)
		return nil
	case len(args) > 1:
		return fmt.Errorf("help takes one command, as in \"hookdedup help keys\"; %q is a second", args[1])
	case strings.HasPrefix(args[0], "-"):
		return fmt.Errorf("help takes a command's name, as in \"hookdedup help keys\"; %q is not one", args[0])
	}
	var out bytes.Buffer
	err := run(ctx, []string{args[0], "-h"}, e.getenv, strings.NewReader(""), &out, &out)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		if errors.Is(err, errUnknownCommand) {
			return fmt.Errorf("help: unknown command %q; \"hookdedup help\" lists them", args[0])
		}
		return err
	}
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// commonFlags are the flags every command takes: where the config and database are.
type commonFlags struct {
	cmd            string
	fs             *flag.FlagSet
	configPath     string
	configExplicit bool
	overrides      map[string]string // top-level settings given as flags
}

// newFlags returns a flag set with --config and one flag per top-level setting (each
// defaulting to "unset", so that the file and the environment apply below it).
func newFlags(name string, e env) *commonFlags {
	c := &commonFlags{cmd: name, fs: flag.NewFlagSet("hookdedup "+name, flag.ContinueOnError), overrides: map[string]string{}}
	c.fs.SetOutput(e.stderr)
	c.configPath = defaultConfigFile
	if v := e.getenv("HOOKDEDUP_CONFIG"); v != "" {
		c.configPath, c.configExplicit = v, true
	}
	c.fs.Func("config", "configuration file (default hookdedup.toml, $HOOKDEDUP_CONFIG)", func(v string) error {
		c.configPath, c.configExplicit = v, true
		return nil
	})
	var cfg config
	for _, s := range cfg.settings() {
		name := s.name
		c.fs.Func(strings.ReplaceAll(name, "_", "-"), s.usage+" ($HOOKDEDUP_"+strings.ToUpper(name)+")", func(v string) error {
			c.overrides[name] = v
			return nil
		})
	}
	return c
}

// parse parses args, letting flags stand before or after the positional arguments, and
// returns the positional ones.
func (c *commonFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// noArguments refuses the positional arguments of a command that takes flags only. Left
// unread, an argument meant as a flag's value would be dropped without a word, and the
// command would run on its defaults: "serve 127.0.0.1:9000" on the default address and
// database, "keys pms" over every source. meant is the flag the argument most likely
// belongs to, unless it looks like a config file or a database.
func noArguments(cmd string, pos []string, meant string) error {
	if len(pos) == 0 {
		return nil
	}
	arg := pos[0]
	switch u, err := url.Parse(arg); {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https"):
		arg = u.Redacted() // a web address, never its password
	case isPostgres(arg):
		arg, meant = displayPath(arg), "--database" // never the URL's password
	case serverForm(arg) != "":
		// A connection string in another form may hold a password anywhere: not shown.
		return fmt.Errorf("unexpected argument (a database connection string, not shown): %s takes flags only (did you mean --database?)", cmd)
	case strings.HasSuffix(arg, ".toml"):
		meant = "--config"
	case strings.HasSuffix(arg, ".db"):
		meant = "--database"
	}
	return fmt.Errorf("unexpected argument %q: %s takes flags only (did you mean %s %s?)", arg, cmd, meant, arg)
}

// load reads the configuration: defaults, file, environment, then these flags. A
// variable whose setting a flag gives is not read at all: the flag wins, even over a
// value that would be refused, as a flag is how an operator works around an
// environment they do not control.
func (c *commonFlags) load(e env) (config, error) {
	getenv := func(k string) string {
		if name, ok := strings.CutPrefix(k, "HOOKDEDUP_"); ok {
			if _, given := c.overrides[strings.ToLower(name)]; given {
				return ""
			}
		}
		return e.getenv(k)
	}
	if c.configExplicit && c.configPath == "" {
		// --config "$CONFIG" with the variable unset: read as no file at all, the
		// error would name none (": open : no such file or directory").
		return config{}, errors.New("--config is empty (an unset variable?): give the configuration file, or leave --config out to read ./" + defaultConfigFile)
	}
	cfg, err := loadConfig(c.configPath, c.configExplicit, getenv)
	if err != nil {
		return config{}, err
	}
	for _, s := range cfg.settings() {
		if v, ok := c.overrides[s.name]; ok {
			flag := "--" + strings.ReplaceAll(s.name, "_", "-")
			if err := s.set(v); err != nil {
				return config{}, fmt.Errorf("%s: %w", flag, err)
			}
			cfg.from(s.name, flag)
		}
	}
	if cfg.SessionIdle > cfg.SessionMax {
		return config{}, cfg.placed(fmt.Errorf("session_idle (%s) is longer than session_max (%s): a session would never end for want of activity",
			cfg.SessionIdle, cfg.SessionMax), "session_idle", "session_max")
	}
	if err := cfg.checkListen(); err != nil {
		return config{}, err
	}
	if err := cfg.checkDatabase(); err != nil {
		return config{}, cfg.placed(err, "database")
	}
	if err := cfg.checkHTTPS(); err != nil {
		return config{}, err
	}
	cfg.IgnoredEnv = unknownEnv(os.Environ(), e.getenv)
	if c.cmd != "serve" { // serve logs them, in its log's format
		for _, line := range cfg.IgnoredEnv {
			fmt.Fprintln(e.stderr, "warning:", line)
		}
	}
	return cfg, nil
}

// open loads the configuration and opens its database, which must exist (openExisting).
func (c *commonFlags) open(ctx context.Context, e env) (config, storage.Store, error) {
	cfg, err := c.load(e)
	if err != nil {
		return config{}, nil, err
	}
	db, err := openExisting(ctx, cfg, e)
	if err != nil {
		return config{}, nil, err
	}
	return cfg, db, nil
}
