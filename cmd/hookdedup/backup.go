package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// runBackup writes a consistent copy of the database to FILE, while serve runs. Given a
// directory (DIR/, or one that exists) it writes a new dated file there and keeps the
// newest --keep of them, which is what a daily timer needs.
func runBackup(ctx context.Context, args []string, e env) error {
	flags := newFlags("backup", e)
	keep := flags.fs.Int("keep", defaultKeep, "with a DIR/: how many of the database's backups to keep there; its older ones are removed (0 keeps all)")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem("backup", []string{"FILE (or DIR/)"}, pos, false); p != "" {
		return errors.New(p + "\nusage: hookdedup backup FILE | hookdedup backup [--keep N] DIR/")
	}
	dest := pos[0]
	if dest == "" {
		// "$BACKUP" with the variable unset: refused before the copy, which would end in
		// a failed rename to "".
		return errors.New("backup: FILE is empty (an unset variable?): give the backup's file, or DIR/")
	}
	if isPostgres(dest) || serverForm(dest) != "" {
		return errors.New("backup: the destination (not shown, as it may hold a password) names a database server, not a file; back a PostgreSQL database up with pg_dump")
	}
	st, err := os.Stat(dest)
	intoDir := strings.HasSuffix(dest, "/") || (err == nil && st.IsDir())
	keepSet := false
	flags.fs.Visit(func(f *flag.Flag) { keepSet = keepSet || f.Name == "keep" })
	if keepSet && !intoDir {
		return fmt.Errorf("--keep applies to a directory of backups (DIR/), and %s is a file", dest)
	}
	if *keep < 0 {
		return fmt.Errorf("--keep %d: give a number of backups, or 0 to keep them all", *keep)
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	if isPostgres(cfg.Database) {
		return errors.New("backup copies a SQLite database file; back a PostgreSQL database up with pg_dump")
	}
	// Looked for before the directory is made: a backup of no database makes nothing.
	if _, err := os.Stat(cfg.Database); errors.Is(err, os.ErrNotExist) {
		return noDatabaseError{path: cfg.Database}
	}
	// The directory is made as serve makes the database's (0700): a backup holds every
	// delivery and the sources' secrets.
	if intoDir {
		if err := sqlite.MakeDirs(dest); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		removeLeftBackupCopies(dest)
		if dest, err = reserveBackupName(dest, backupStem(cfg.Database), time.Now()); err != nil {
			return err
		}
	} else if err := sqlite.MakeDirs(filepath.Dir(dest)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The file as it is, never migrated: taken by a newer version before it upgrades,
	// the backup is of the schema the running serve knows, which can go back to it.
	info, err := sqlite.BackupFile(ctx, cfg.Database, dest)
	if errors.Is(err, storage.ErrNoDatabase) {
		return noDatabaseError{path: cfg.Database}
	}
	if err != nil {
		if intoDir {
			removeIfEmpty(dest)
		}
		return err
	}
	sqlite.WarnShared(cliLogger(e), cfg.Database)
	fmt.Fprintf(e.stdout, "backed up %s to %s: %s, %s, %s\n", cfg.Database, info.Path,
		count(info.Deliveries, "delivery", "deliveries"), count(info.Claims, "key", "keys"), count(info.Bytes, "byte", "bytes"))
	if len(info.Newer) > 0 {
		// The copy is sound, and the newer version restores it; this one cannot.
		fmt.Fprintf(e.stderr, "warning: a newer hookdedup migrated %s (migrations %s): only that version or a later one can restore %s, not this one\n",
			cfg.Database, migrationList(info.Newer), info.Path)
	}
	if !intoDir || *keep == 0 {
		return nil
	}
	removed, later, err := pruneBackups(ctx, filepath.Dir(dest), filepath.Base(info.Path), backupStem(cfg.Database), info.ID, *keep)
	for _, name := range removed {
		fmt.Fprintf(e.stdout, "removed old backup %s\n", name)
	}
	for _, name := range later {
		fmt.Fprintf(e.stdout, "kept %s, named for a time after this backup's (was the clock ahead?): it neither counts toward --keep nor is removed\n", name)
	}
	return err
}

// migrationList names migrations by their files, as the refusals of a newer schema do.
func migrationList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = path.Base(n)
	}
	return strings.Join(out, ", ")
}

// backupTime is the time in a dated backup's name: UTC, so that names sort in time
// order whatever the machine's zone or its changes.
const backupTime = "20060102T150405Z"

// backupStem begins the names of the dated backups of the database at dbPath: its file
// name without the extension (hookdedup.db's are hookdedup-<time>.db), so that the
// backups of two databases sharing a directory are told apart, and one database's
// --keep leaves the other's alone.
func backupStem(dbPath string) string {
	base := filepath.Base(dbPath)
	if stem := strings.TrimSuffix(base, filepath.Ext(base)); stem != "" {
		return stem
	}
	return base
}

// reserveBackupName makes an empty file (0600) in dir under the name of a backup of
// stem's database taken at t, <stem>-<time>.db, or <stem>-<time>.2.db, .3 … after a
// name taken, and returns its path. The file keeps the name for this backup: two
// taken within one second (a timer and an operator; two databases of one file name in
// different directories) would otherwise both write to one name, where the second
// replaces the first or is refused. A backup writes over an empty file. The number
// goes on after the highest of that second, also when --keep removed a lower one:
// the first name again would sort before the backups taken since.
func reserveBackupName(dir, stem string, t time.Time) (string, error) {
	at := t.UTC().Format(backupTime)
	base := stem + "-" + at
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	first := 1
	for _, ent := range entries {
		if b, ok := parseBackupName(stem, ent.Name()); ok && b.at == at {
			first = max(first, b.n+1)
		}
	}
	for n := first; ; n++ {
		name := base + ".db"
		if n > 1 {
			name = fmt.Sprintf("%s.%d.db", base, n)
		}
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("backup: %w", err)
		}
		return path, f.Close()
	}
}

// removeIfEmpty removes the file at path if it is empty: the name a backup that failed
// had reserved.
func removeIfEmpty(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		os.Remove(path)
	}
}

// datedBackup is a dated backup in a directory: its path, the time in its name and its
// number within that second (1 when it has none).
type datedBackup struct {
	path string
	at   string
	n    int
}

// before reports whether b was taken before c, by their names.
func (b datedBackup) before(c datedBackup) bool {
	return b.at < c.at || b.at == c.at && b.n < c.n
}

// parseBackupName reads a name that reserveBackupName gives to a backup of stem's
// database; ok is false for any other name.
func parseBackupName(stem, name string) (b datedBackup, ok bool) {
	rest, ok := strings.CutPrefix(name, stem+"-")
	if !ok {
		return b, false
	}
	m := datedSuffix.FindStringSubmatch(rest)
	if m == nil {
		return b, false
	}
	b.at, b.n = m[1], 1
	if m[2] != "" {
		n, err := strconv.Atoi(m[2])
		if err != nil || n < 2 {
			return b, false
		}
		b.n = n
	}
	return b, true
}

// datedSuffix matches what follows "<stem>-" in a dated backup's name.
var datedSuffix = regexp.MustCompile(`^([0-9]{8}T[0-9]{6}Z)(?:\.([0-9]+))?\.db$`)

// leftBackupCopy matches the copy a backup into a directory writes before it renames
// it to its name (sqlite.RemoveLeftCopies), capturing that name.
var leftBackupCopy = regexp.MustCompile(`^\.(.+-[0-9]{8}T[0-9]{6}Z(?:\.[0-9]+)?\.db)\.[0-9]+\.tmp$`)

// removeLeftBackupCopies removes the copies that backups into dir killed before they
// finished left behind, each under the name of its own moment: the next backup, of
// another name, would never come across them. The name such a backup reserved is left
// as an empty file: once no copy for it lies beside it, and it is a day old, it is
// removed too. A younger one may be another backup's that has not begun its copy.
func removeLeftBackupCopies(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range entries {
		if m := leftBackupCopy.FindStringSubmatch(ent.Name()); m != nil {
			sqlite.RemoveLeftCopies(filepath.Join(dir, m[1]))
		}
	}
	if entries, err = os.ReadDir(dir); err != nil {
		return
	}
	copying := map[string]bool{}
	for _, ent := range entries {
		if m := leftBackupCopy.FindStringSubmatch(ent.Name()); m != nil {
			copying[m[1]] = true
		}
	}
	for _, ent := range entries {
		m := reservedName.FindStringSubmatch(ent.Name())
		if m == nil || copying[ent.Name()] {
			continue
		}
		// Only an old one, by the moment its name was reserved for: another backup may
		// have reserved it a moment ago and not begun its copy yet; removed, the name
		// would be reserved again by the next backup that second, and one copy renamed
		// over the other.
		reserved, err := time.Parse(backupTime, m[1])
		if err != nil || time.Since(reserved) < leftReservationAge {
			continue
		}
		if info, err := ent.Info(); err == nil && info.Mode().IsRegular() && info.Size() == 0 {
			os.Remove(filepath.Join(dir, ent.Name()))
		}
	}
}

// leftReservationAge is how old an empty reserved name must be to be taken for one a
// killed backup left: longer than any backup takes.
const leftReservationAge = 24 * time.Hour

// reservedName matches the names reserveBackupName gives, of any database's backups.
var reservedName = regexp.MustCompile(`^.+-([0-9]{8}T[0-9]{6}Z)(?:\.[0-9]+)?\.db$`)

// pruneBackups removes all but the newest keep backups in dir of the database whose
// backups' names begin with stem and whose identity is id, judged by their names, the
// one just written (newest) among them. Other files there are left alone: those of
// other names, those of this name whose identity is not id (another database of the
// same file name in another directory), and those it cannot read as a hookdedup
// database (an empty one is a name another backup is writing to). So a backup without
// an identity, taken before identities existed, is never pruned by a database that has
// one (it may be another database's, not yet upgraded): remove those by hand. A
// database without one yet (its serve not restarted since the upgrade) prunes only the
// backups without one, by their names, as before identities. A backup named for a later time than newest's was
// taken while the clock was ahead: removing by name would remove newest first, and
// every backup after it, until the clock caught up, so such a one is neither counted
// nor removed, and returned in later. It returns the paths it removed.
func pruneBackups(ctx context.Context, dir, newest, stem, id string, keep int) (removed, later []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("backup: %w", err)
	}
	last, ok := parseBackupName(stem, newest)
	if !ok {
		return nil, nil, fmt.Errorf("backup: %s is not named as a dated backup of %s", newest, stem)
	}
	var backups []datedBackup
	for _, ent := range entries {
		b, ok := parseBackupName(stem, ent.Name())
		if !ok || !ent.Type().IsRegular() || ent.Name() == newest {
			continue
		}
		b.path = filepath.Join(dir, ent.Name())
		theirs, err := sqlite.BackupID(ctx, b.path)
		if err != nil || theirs != id {
			continue
		}
		if last.before(b) {
			later = append(later, b.path)
			continue
		}
		backups = append(backups, b)
	}
	sort.Slice(backups, func(i, j int) bool { return backups[i].before(backups[j]) })
	for len(backups) > keep-1 {
		if err := os.Remove(backups[0].path); err != nil {
			return removed, later, fmt.Errorf("backup: removing an old backup: %w", err)
		}
		removed = append(removed, backups[0].path)
		backups = backups[1:]
	}
	return removed, later, nil
}

// runRestore replaces the database with the backup FILE. It refuses while any process
// (serve, or another command) has the database open.
func runRestore(ctx context.Context, args []string, e env) error {
	flags := newFlags("restore", e)
	copyOf := flags.fs.Bool("copy", false, "restore a copy that is another database from then on (a rehearsal): it gets an identity of its own, so that its backups are kept and pruned apart from the original's")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem("restore", []string{"FILE"}, pos, false); p != "" {
		return errors.New(p + "\nusage: hookdedup restore [--copy] FILE")
	}
	if pos[0] == "" {
		// "$BACKUP" with the variable unset, which restore would read as ".".
		return errors.New("restore: FILE is empty (an unset variable?): give the backup's file")
	}
	if isPostgres(pos[0]) || serverForm(pos[0]) != "" {
		return errors.New("restore: FILE (not shown, as it may hold a password) names a database server, not a backup file; restore a PostgreSQL database with pg_restore")
	}
	if fi, err := os.Stat(pos[0]); err == nil && fi.IsDir() {
		// Read as a file, it failed as a write ("copy_file_range: is a directory").
		return fmt.Errorf("restore: %s is a directory: give the backup's file (backups into a directory are named <name>-<time>.db)", pos[0])
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	if isPostgres(cfg.Database) {
		return errors.New("restore replaces a SQLite database file; restore a PostgreSQL database with pg_restore")
	}
	// On a new machine the database's directory may not be made yet: made as serve
	// makes it (0700), once the backup is known to be there.
	if _, err := os.Stat(pos[0]); err == nil {
		if err := sqlite.MakeDirs(filepath.Dir(cfg.Database)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	restore := sqlite.Restore
	if *copyOf {
		restore = sqlite.RestoreCopy
	}
	info, err := restore(ctx, pos[0], cfg.Database)
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("restore: %s is open in another process: stop serve (and any other hookdedup command using it), then restore", cfg.Database)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored %s from %s: %s, %s\n", info.Path, pos[0],
		count(info.Deliveries, "delivery", "deliveries"), count(info.Claims, "key", "keys"))
	if info.Previous != "" {
		fmt.Fprintf(e.stdout, "the database it replaced is kept as %s\n", info.Previous)
	}
	return nil
}
