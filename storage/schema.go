package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// NewerSchemaError is the error of an engine asked to open a database that records
// migrations it does not have (unknown, as the database names them): a newer version
// migrated it, and an older one would run on a schema it does not know, with triggers
// and columns whose upkeep it skips. Both engines refuse with these words.
func NewerSchemaError(unknown []string) error {
	return fmt.Errorf("the database's schema is newer than this hookdedup knows (migrations %s): run the newer version, or restore a backup taken before it migrated",
		migrationNames(unknown))
}

// NewerBackupError is the error of a restore of a backup that a newer version migrated
// (unknown names the migrations this build lacks): restored, this version would refuse
// to open it, and so the newer one is the one to restore it with.
func NewerBackupError(unknown []string) error {
	return fmt.Errorf("the backup is of a newer schema than this hookdedup knows (migrations %s): restore it with the version that took it, or a later one",
		migrationNames(unknown))
}

// UpgradeInUseError is the error of an engine asked to open a database that another
// process has open and that lacks migrations this version has (pending): migrating it
// under that process (an earlier version's serve, most often) would leave it running on
// a schema it does not know, and unable to start again on it.
func UpgradeInUseError(pending []string) error {
	return fmt.Errorf("the database's schema is older than this hookdedup's (it lacks migrations %s), and another process has it open "+
		"(an earlier version's serve?): stop it, then start this version's serve, which upgrades the schema; a backup taken "+
		"before that is of the schema as it is",
		migrationNames(pending))
}

// UpgradeByServeError is the error of an engine that many processes share (PostgreSQL)
// asked by a command other than serve to open a database that lacks migrations this
// version has (pending). Whether an earlier version's replicas still run on it cannot
// be told from here, and migrated under them they would run on a schema they do not
// know: only serve, started once they are stopped, upgrades it.
func UpgradeByServeError(pending []string) error {
	return upgradeByServeError{fmt.Errorf("the database's schema is older than this hookdedup's (it lacks migrations %s), and only serve "+
		"upgrades it, since replicas of an earlier version may have it open: stop them, then start this version's "+
		"serve first; nothing was changed",
		migrationNames(pending))}
}

// ErrUpgradeByServe is what every UpgradeByServeError is (errors.Is), for a command
// that has more to say of it.
var ErrUpgradeByServe = errors.New("the schema is upgraded by serve only")

type upgradeByServeError struct{ error }

func (upgradeByServeError) Is(target error) bool { return target == ErrUpgradeByServe }

// migrationNames lists migrations as the errors name them: by file name, in order.
func migrationNames(migrations []string) string {
	names := make([]string, len(migrations))
	for i, n := range migrations {
		names[i] = strings.TrimPrefix(n, "migrations/")
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
