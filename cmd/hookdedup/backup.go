package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	keep := flags.fs.Int("keep", defaultKeep, "with a DIR/: how many backups to keep there; older ones are removed (0 keeps all)")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: hookdedup backup FILE | hookdedup backup [--keep N] DIR/")
	}
	dest := pos[0]
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
		dest = filepath.Join(dest, backupName(time.Now()))
		removeLeftBackupCopies(filepath.Dir(dest))
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
		return err
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %d deliveries, %d keys, %d bytes\n",
		cfg.Database, info.Path, info.Deliveries, info.Claims, info.Bytes)
	if !intoDir || *keep == 0 {
		return nil
	}
	removed, later, err := pruneBackups(filepath.Dir(dest), filepath.Base(info.Path), *keep)
	for _, name := range removed {
		fmt.Fprintf(e.stdout, "removed old backup %s\n", name)
	}
	for _, name := range later {
		fmt.Fprintf(e.stdout, "kept %s, named for a time after this backup's (was the clock ahead?): it neither counts toward --keep nor is removed\n", name)
	}
	return err
}

// backupName is the name of a backup taken at t in a directory of backups: UTC, so that
// names sort in time order whatever the machine's zone or its changes.
func backupName(t time.Time) string {
	return "hookdedup-" + t.UTC().Format("20060102T150405Z") + ".db"
}

// backupFile matches the names backupName gives, and nothing else in the directory.
var backupFile = regexp.MustCompile(`^hookdedup-[0-9]{8}T[0-9]{6}Z\.db$`)

// leftBackupCopy matches the copy a backup into a directory writes before it renames
// it to its name (sqlite.RemoveLeftCopies), capturing that name.
var leftBackupCopy = regexp.MustCompile(`^\.(hookdedup-[0-9]{8}T[0-9]{6}Z\.db)\.[0-9]+\.tmp$`)

// removeLeftBackupCopies removes the copies that backups into dir killed before they
// finished left behind, each under the name of its own moment: the next backup, of
// another name, would never come across them.
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
}

// pruneBackups removes all but the newest keep backups in dir, judged by their names,
// the one just written (newest, by its name) among them; other files there are left
// alone. A backup named for a later time than newest's was taken while the clock was
// ahead: removing by name would remove newest first, and every backup after it, until
// the clock caught up, so such a one is neither counted nor removed, and returned in
// later. It returns the paths it removed.
func pruneBackups(dir, newest string, keep int) (removed, later []string, err error) {
	entries, err := os.ReadDir(dir) // sorted by name, so oldest first
	if err != nil {
		return nil, nil, fmt.Errorf("backup: %w", err)
	}
	var backups []string
	for _, ent := range entries {
		if !ent.Type().IsRegular() || !backupFile.MatchString(ent.Name()) {
			continue
		}
		if ent.Name() > newest {
			later = append(later, filepath.Join(dir, ent.Name()))
			continue
		}
		backups = append(backups, filepath.Join(dir, ent.Name()))
	}
	for len(backups) > keep {
		if err := os.Remove(backups[0]); err != nil {
			return removed, later, fmt.Errorf("backup: removing an old backup: %w", err)
		}
		removed = append(removed, backups[0])
		backups = backups[1:]
	}
	return removed, later, nil
}

// runRestore replaces the database with the backup FILE. It refuses while any process
// (serve, or another command) has the database open.
func runRestore(ctx context.Context, args []string, e env) error {
	flags := newFlags("restore", e)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: hookdedup restore FILE")
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
	info, err := sqlite.Restore(ctx, pos[0], cfg.Database)
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("restore: %s is open in another process: stop serve (and any other hookdedup command using it), then restore", cfg.Database)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored %s from %s: %d deliveries, %d keys\n", info.Path, pos[0], info.Deliveries, info.Claims)
	if info.Previous != "" {
		fmt.Fprintf(e.stdout, "the database it replaced is kept as %s\n", info.Previous)
	}
	return nil
}
