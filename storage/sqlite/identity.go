package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// databaseIDSetting names the setting that holds a database's identity (migration
// 0034_database_id.sql).
const databaseIDSetting = "database_id"

// fileKind is what a SQLite file holds, as a backup about to replace it sees it.
type fileKind int

const (
	// noSchema: a SQLite file without a table, or with only hookdedup's table of
	// migrations and none recorded there: it holds nothing to lose.
	noSchema fileKind = iota
	// otherApplication: a SQLite database hookdedup did not make.
	otherApplication
	// hookdedupDatabase: a database hookdedup made (and migrated at least once).
	hookdedupDatabase
)

// identify says what the database c reads is and, for a hookdedup database, its
// identity: "" for one made, and not opened since, by a version before identities. A
// hookdedup database is told by its migrations table and the first migration recorded
// there: another application may keep a table of that name (Laravel does), with other
// columns.
func identify(ctx context.Context, c *sql.DB) (fileKind, string, error) {
	var objects, ours int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&objects); err != nil {
		return 0, "", err
	}
	if objects == 0 {
		return noSchema, "", nil
	}
	var shaped int // the migrations table has hookdedup's column
	err := c.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('migrations') WHERE name = 'name'`).Scan(&shaped)
	if err != nil {
		return 0, "", err
	}
	if shaped > 0 {
		err = c.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE name = 'migrations/0001_init.sql'`).Scan(&ours)
		if err != nil {
			return 0, "", err
		}
	}
	if ours == 0 && shaped > 0 {
		// migrate makes its table before the first migration's transaction: a first
		// serve stopped in between (a full disk, a kill) left that table alone, empty,
		// which holds nothing to lose.
		var others, recorded int
		if err := c.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sqlite_schema WHERE tbl_name != 'migrations'),
			(SELECT count(*) FROM migrations)`).Scan(&others, &recorded); err != nil {
			return 0, "", err
		}
		if others == 0 && recorded == 0 {
			return noSchema, "", nil
		}
	}
	if ours == 0 {
		return otherApplication, "", nil
	}
	var id string
	err = c.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, databaseIDSetting).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return hookdedupDatabase, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	return hookdedupDatabase, id, nil
}

// otherApplicationError refuses the database at path, which identify found to be
// another application's: migrated, it would have hookdedup's schema written into it, and
// be taken for a hookdedup database that holds nothing.
func otherApplicationError(path string) error {
	return fmt.Errorf("%s is a SQLite database that hookdedup did not make (another application's): check database in the configuration", path)
}

// refuseOtherApplication returns otherApplicationError when c reads another
// application's database; what else is wrong with the file, the caller's own reads say.
func refuseOtherApplication(ctx context.Context, c *sql.DB, path string) error {
	if kind, _, err := identify(ctx, c); err == nil && kind == otherApplication {
		return otherApplicationError(path)
	}
	return nil
}

// refuseOtherApplicationFile is refuseOtherApplication of the file at path, read
// read-only; a new (empty) file is no application's.
func refuseOtherApplicationFile(ctx context.Context, path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	c := openReadOnly(path, 5*time.Second)
	defer c.Close()
	return refuseOtherApplication(ctx, c, path)
}

// newDatabaseID returns a new random identity, as migration 0034 makes one.
func newDatabaseID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a database id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// openImmutable opens the database at path to read as a closed file that nothing writes
// to: unlike a read-only open, it leaves no -wal and -shm beside a file in WAL mode.
func openImmutable(path string) (*sql.DB, error) {
	return sql.Open("sqlite3", fileURI(path)+"?mode=ro&immutable=1")
}

// BackupID returns the identity of the hookdedup database at path, a backup: a random
// id made with the schema of the database it copies, the same in every copy of it. It
// is "" for a backup of a database made by a version before identities. The file is
// read as a closed one that nothing writes to (immutable): a look at each backup in a
// directory leaves no -wal and -shm beside it, as a read-only open of a database in WAL
// mode would; a backup holds everything in its file. Returns an error wrapping
// storage.ErrNoDatabase when there is no file at path, and storage.ErrNotHookdedup for
// a file hookdedup did not make (an empty one among them).
func BackupID(ctx context.Context, path string) (string, error) {
	if missing(path) {
		return "", fmt.Errorf("database id of %s: %w", path, storage.ErrNoDatabase)
	}
	c, err := openImmutable(path)
	if err != nil {
		return "", fmt.Errorf("database id of %s: %w", path, err)
	}
	defer c.Close()
	kind, id, err := identify(ctx, c)
	if err != nil {
		return "", fmt.Errorf("database id of %s: %w", path, err)
	}
	if kind != hookdedupDatabase {
		return "", fmt.Errorf("database id of %s: %w", path, storage.ErrNotHookdedup)
	}
	return id, c.Close()
}
