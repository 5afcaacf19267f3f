package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

const auditUsage = `usage: hookdedup audit verify [--anchor ID:HASH]
       hookdedup audit export --format csv|json [--output FILE]`

const auditHelp = auditUsage + `

verify checks the audit log's hash chain from its first row: exit 0 when it holds, 1
naming the first row that breaks it, 2 for a usage error, no database, or a database it
cannot read (one whose schema predates the chain: start serve on it once to upgrade
it). export writes every row with its hash (to FILE, mode 0600, or stdout), for an
auditor to recompute the chain. Both open the database read-only and never change it,
even while serve runs.`

// runAudit checks or exports the audit log's hash chain (storage/auditchain.go).
func runAudit(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return auditUsageError(e, "", "verify or export?")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "verify":
		return runAuditVerify(ctx, rest, e)
	case "export":
		return runAuditExport(ctx, rest, e)
	case "help", "-h", "--help":
		fmt.Fprintln(e.stdout, auditHelp)
		return nil
	default:
		return auditUsageError(e, "", fmt.Sprintf("unknown subcommand %q", sub))
	}
}

// auditUsageError says what was wrong with the command line, and the usage, on stderr,
// and returns flag.ErrHelp: the exit status is then 2, which a script tells apart from
// the 1 of a broken chain.
func auditUsageError(e env, sub, problem string) error {
	name := "hookdedup audit"
	if sub != "" {
		name += " " + sub
	}
	fmt.Fprintf(e.stderr, "%s: %s\n%s\n", name, problem, auditUsage)
	return flag.ErrHelp
}

// parseAuditFlags parses the flags of an audit subcommand, which takes no positional
// argument. A mistake is a usage error (the flag package has said what it was).
func parseAuditFlags(flags *commonFlags, sub string, args []string, e env) error {
	pos, err := flags.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		fmt.Fprintln(e.stderr, auditUsage)
		return flag.ErrHelp
	}
	if len(pos) > 0 {
		return auditUsageError(e, sub, fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	return nil
}

func runAuditVerify(ctx context.Context, args []string, e env) error {
	flags := newFlags("audit verify", e)
	anchorFlag := flags.fs.String("anchor", "", "ID:HASH of a row noted from an earlier verify: the chain must still pass through it")
	if err := parseAuditFlags(flags, "verify", args, e); err != nil {
		return err
	}
	var anchor storage.AuditAnchor
	if *anchorFlag != "" {
		var problem string
		if anchor, problem = parseAnchor(*anchorFlag); problem != "" {
			return auditUsageError(e, "verify", problem)
		}
	}
	_, db, err := openAudit(ctx, flags, e)
	if err != nil {
		return auditUncheckedError{err}
	}
	defer db.Close()
	c, err := db.VerifyAudit(ctx, anchor)
	if err != nil {
		return auditUncheckedError{err}
	}
	w := bufio.NewWriter(e.stdout)
	if c.Break != nil {
		if c.Rows > 0 {
			fmt.Fprintf(w, "%s, from the genesis to row %d (hash %s)\n", count(c.Rows, "row chains", "rows chain"), c.LastID, c.LastHash)
			w.Flush() // the break is the news, and its error says it whatever became of this
		}
		return fmt.Errorf("audit log broken at row %d (%s): %s", c.Break.ID, c.Break.Kind, c.Break.Detail)
	}
	if c.Rows == 0 {
		fmt.Fprintln(w, "audit log empty: nothing to check")
	} else {
		fmt.Fprintf(w, "audit log intact: %s checked, from the genesis to row %d\nlast hash: %s\n", count(c.Rows, "row", "rows"), c.LastID, c.LastHash)
		if anchor.Hash != "" {
			fmt.Fprintf(w, "passes through the anchor, row %d\n", anchor.ID)
		}
		fmt.Fprintf(w, "to check later that nothing up to here changed, keep this outside the database:\n  hookdedup audit verify --anchor %d:%s\n",
			c.LastID, c.LastHash)
	}
	// A report that could not be written (stdout on a full disk) lost the anchor to keep:
	// not a pass a script may take from exit status 0, nor a broken chain (1).
	if err := w.Flush(); err != nil {
		return auditUncheckedError{fmt.Errorf("the chain was checked, but its report could not be printed: %w", err)}
	}
	return nil
}

// auditUncheckedError is a verify that could not check the chain at all (a config or
// a database it cannot read). main exits 2 on it, as for a usage error, so that the
// exit status 1 always means a broken chain: a script that raises the alarm on 1 must
// not take a typo in --database for tampering.
type auditUncheckedError struct{ err error }

func (e auditUncheckedError) Error() string { return e.err.Error() }
func (e auditUncheckedError) Unwrap() error { return e.err }

// parseAnchor reads ID:HASH; problem says what is wrong with it.
func parseAnchor(v string) (a storage.AuditAnchor, problem string) {
	id, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(id, 10, 64)
	hash = strings.ToLower(hash)
	// Ids start at 1: an anchor below would be reported as a row deleted, a false sign
	// of tampering.
	if !ok || err != nil || n < 1 || len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return a, fmt.Sprintf("--anchor %q: want ID:HASH, a row's id (from 1) and its 64-hex-digit hash, as verify prints them", v)
	}
	return storage.AuditAnchor{ID: n, Hash: hash}, ""
}

func runAuditExport(ctx context.Context, args []string, e env) error {
	flags := newFlags("audit export", e)
	format := flags.fs.String("format", "", "csv or json (required)")
	output := flags.fs.String("output", "", "file to write, mode 0600 (default: stdout)")
	if err := parseAuditFlags(flags, "export", args, e); err != nil {
		return err
	}
	outputSet := false
	flags.fs.Visit(func(f *flag.Flag) { outputSet = outputSet || f.Name == "output" })
	if outputSet && *output == "" {
		// --output "$FILE" with the variable unset: the log would go to stdout, where
		// no file was asked for.
		return auditUsageError(e, "export", "--output is empty (an unset variable?): give a file, or leave --output out to write to stdout")
	}
	var write func(io.Writer, auditLog) (auditExported, error)
	switch *format {
	case "csv":
		write = func(w io.Writer, db auditLog) (auditExported, error) { return exportAuditCSV(ctx, w, db) }
	case "json":
		write = func(w io.Writer, db auditLog) (auditExported, error) { return exportAuditJSON(ctx, w, db) }
	case "":
		return auditUsageError(e, "export", "--format is required: csv or json")
	default:
		return auditUsageError(e, "export", fmt.Sprintf("--format %q: want csv or json", *format))
	}
	cfg, db, err := openAudit(ctx, flags, e)
	if err != nil {
		var schema auditSchemaError
		if errors.As(err, &schema) {
			return auditUncheckedError{err} // exit 2, as for verify
		}
		return err
	}
	defer db.Close()
	if *output == "" || *output == "-" {
		w := bufio.NewWriter(e.stdout)
		x, err := write(w, db)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		fmt.Fprintf(e.stderr, "exported %s\n", x)
		return nil
	}
	if what, err := sqlite.DatabaseFile(*output, cfg.Database); err != nil {
		return fmt.Errorf("audit export to %s: %w", *output, err)
	} else if what != "" {
		return fmt.Errorf("audit export to %s: that is %s", *output, what)
	}
	if what := notAnExport(*output, cfg.File); what != "" {
		return fmt.Errorf("audit export to %s: that is %s, which an export would replace: give the name of a new file, or of an earlier export", *output, what)
	}
	var x auditExported
	err = writePrivate(*output, func(w io.Writer) error {
		var err error
		x, err = write(w, db)
		return err
	})
	if err != nil {
		return fmt.Errorf("audit export to %s: %w", *output, err)
	}
	fmt.Fprintf(e.stdout, "exported %s to %s\n", x, *output)
	return nil
}

// auditExported sums up an export.
type auditExported struct {
	rows     int64
	lastID   int64
	lastHash string
}

func (x auditExported) String() string {
	if x.rows == 0 {
		return "0 rows (the audit log is empty)"
	}
	return fmt.Sprintf("%s, up to row %d (hash %s)", count(x.rows, "row", "rows"), x.lastID, x.lastHash)
}

func (x *auditExported) add(r storage.AuditEntry) {
	x.rows++
	x.lastID, x.lastHash = r.ID, r.Hash
}

// auditTime is the readable time of a row, beside its at in milliseconds (which the
// hash covers): UTC, to the millisecond.
func auditTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// exportAuditCSV writes a header line and one line per row. Each text is exactly as
// stored (no escaping for spreadsheets, which would change what the hash covers).
func exportAuditCSV(ctx context.Context, w io.Writer, db auditLog) (auditExported, error) {
	var x auditExported
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"id", "at", "time", "actor", "action", "source", "key", "reason", "previous_state", "hash"}); err != nil {
		return x, err
	}
	err := db.AuditRows(ctx, func(r storage.AuditEntry) error {
		x.add(r)
		return cw.Write([]string{strconv.FormatInt(r.ID, 10), strconv.FormatInt(r.At.UnixMilli(), 10), auditTime(r.At),
			r.Actor, r.Action, r.Source, r.Key, r.Reason, r.PreviousState, r.Hash})
	})
	if err != nil {
		return x, err
	}
	cw.Flush()
	return x, cw.Error()
}

// auditJSONRow is a row in the JSON export: the columns the hash covers, by their
// names, with the row's time also written for a reader.
type auditJSONRow struct {
	ID            int64  `json:"id"`
	At            int64  `json:"at"`
	Time          string `json:"time"`
	Actor         string `json:"actor"`
	Action        string `json:"action"`
	Source        string `json:"source"`
	Key           string `json:"key"`
	Reason        string `json:"reason"`
	PreviousState string `json:"previous_state"`
	Hash          string `json:"hash"`
}

// exportAuditJSON writes one object: the encoding's name, the genesis, and the rows in
// id order, one per line. A text that is not UTF-8 (a row written outside hookdedup;
// its writer stores only UTF-8) cannot be held exactly by JSON: the export stops there.
func exportAuditJSON(ctx context.Context, w io.Writer, db auditLog) (auditExported, error) {
	var x auditExported
	if _, err := fmt.Fprintf(w, "{\"format\":%q,\"genesis\":%q,\"rows\":[", storage.AuditFormat, storage.AuditGenesis); err != nil {
		return x, err
	}
	var row bytes.Buffer
	enc := json.NewEncoder(&row)
	enc.SetEscapeHTML(false)
	err := db.AuditRows(ctx, func(r storage.AuditEntry) error {
		for _, f := range []struct{ name, v string }{{"actor", r.Actor}, {"action", r.Action}, {"source", r.Source},
			{"key", r.Key}, {"reason", r.Reason}, {"previous_state", r.PreviousState}, {"hash", r.Hash}} {
			if !utf8.ValidString(f.v) {
				return fmt.Errorf("row %d: its %s is not UTF-8, which JSON cannot hold exactly; export as CSV", r.ID, f.name)
			}
		}
		sep := ",\n"
		if x.rows == 0 {
			sep = "\n"
		}
		x.add(r)
		row.Reset()
		row.WriteString(sep)
		if err := enc.Encode(auditJSONRow{ID: r.ID, At: r.At.UnixMilli(), Time: auditTime(r.At), Actor: r.Actor, Action: r.Action,
			Source: r.Source, Key: r.Key, Reason: r.Reason, PreviousState: r.PreviousState, Hash: r.Hash}); err != nil {
			return err
		}
		_, err := w.Write(bytes.TrimSuffix(row.Bytes(), []byte("\n")))
		return err
	})
	if err != nil {
		return x, err
	}
	_, err = io.WriteString(w, "\n]}\n")
	return x, err
}

// notAnExport names what the existing file at path is when an export must not replace
// it: the configuration file (config), or a SQLite database (a backup, a copy that a
// restore kept aside); "" otherwise. A slip in a path (backups/ for exports/) would
// replace a backup with an export.
func notAnExport(path, config string) string {
	if config != "" {
		a, errA := os.Stat(path)
		b, errB := os.Stat(config)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "the configuration file"
		}
	}
	if sqlite.IsDatabaseFile(path) {
		return "a SQLite database (a backup?)"
	}
	return ""
}

// writePrivate writes a file through fill: into a temporary file beside path (mode
// 0600 from its creation, whatever the umask), synced and then renamed over path, so
// that path never holds a partial export and no one else can read it. A path that is a
// symbolic link is written where it leads.
func writePrivate(path string, fill func(io.Writer) error) error {
	// A symbolic link (latest.csv to the auditors' share) is written through, as backup
	// writes through one: renamed onto, it would be replaced, and the export stay here.
	if to, err := os.Readlink(path); err == nil {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("it is %s: give the export's own path (once its disk is there), or the name of a new file", storage.LinkToNothing(to))
		}
		path = target
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("that is a directory; give a file name")
	} else if err == nil && !st.Mode().IsRegular() {
		// Renamed over, a device (/dev/null, to try an export without keeping it) or a
		// FIFO would become a regular file holding the audit log: as root, /dev/null
		// would be one for every program until the machine restarts.
		return errors.New("that is not a regular file (a device such as /dev/null, a FIFO or a socket), which the export would replace: give a file's name, or leave --output out to write to stdout")
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		// Named by the directory, not by the temporary file the error names, which the
		// operator never gave: a directory mistyped, or not made yet.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("there is no directory %s to write it in", dir)
		}
		return fmt.Errorf("cannot write in the directory %s: %w", dir, err)
	}
	defer os.Remove(f.Name()) // gone after the rename; cleans up after a failure
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	w := bufio.NewWriter(f)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return sqlite.SyncDir(dir)
}

// auditSchemaError is a database that audit verify and export cannot read as it is:
// its schema predates the chain, or hookdedup never set it up.
type auditSchemaError struct{ err error }

func (e auditSchemaError) Error() string { return e.err.Error() }
func (e auditSchemaError) Unwrap() error { return e.err }

// openAudit loads the configuration and opens its database read-only, without
// migrating it (sqlite.OpenAuditFile): a verifier must not change what it checks, and
// the file may be an auditor's copy.
// auditLog is a database's audit log opened to be checked or exported, without being
// changed.
type auditLog interface {
	VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (storage.AuditCheck, error)
	AuditRows(ctx context.Context, fn func(storage.AuditEntry) error) error
	Close() error
}

func openAudit(ctx context.Context, flags *commonFlags, e env) (config, auditLog, error) {
	cfg, err := flags.load(e)
	if err != nil {
		return config{}, nil, err
	}
	var db auditLog
	if isPostgres(cfg.Database) {
		db, err = postgres.Open(ctx, cfg.Database, postgres.Options{NoMigrate: true})
	} else {
		db, err = sqlite.OpenAuditFile(ctx, cfg.Database, 0)
	}
	switch {
	case errors.Is(err, storage.ErrNoDatabase):
		return config{}, nil, noDatabaseError{path: cfg.Database}
	case errors.Is(err, storage.ErrAuditSchema):
		return config{}, nil, auditSchemaError{fmt.Errorf("%s: the database's schema predates the audit log's hash chain, "+
			"and this command does not change the database it checks: upgrade the database by starting hookdedup serve on it "+
			"(or check a copy upgraded that way)", displayPath(cfg.Database))}
	case errors.Is(err, storage.ErrNotHookdedup):
		return config{}, nil, auditSchemaError{fmt.Errorf("%s: not a hookdedup database", displayPath(cfg.Database))}
	case err != nil:
		return config{}, nil, err
	}
	return cfg, db, nil
}
