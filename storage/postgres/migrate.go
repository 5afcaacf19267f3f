package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies each embedded migration that the database has not recorded, each in
// its own transaction, in the order of their names, holding migrateLock on one
// connection of its own throughout. Returns an error naming them when the database
// records migrations that this build does not have, and, unless upgrade, when it lacks
// some of this build's but has others (an earlier version set it up).
func (db *DB) migrate(ctx context.Context, upgrade bool) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// A session lock, taken and given back on this connection, which goes back to the
	// pool only after the unlock.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("wait for the migration lock: %w", err)
	}
	defer func() {
		// A failed unlock (the connection broke) ends the session, and the lock with it.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock)
	}()
	if err := ownSchema(ctx, conn.Conn()); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx,
		`CREATE TABLE IF NOT EXISTS migrations (name text PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	rows, err := conn.Query(ctx, `SELECT name FROM migrations`)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	var unknown []string
	for _, a := range applied {
		if !slices.Contains(names, a) {
			unknown = append(unknown, a)
		}
	}
	if len(unknown) > 0 {
		return storage.NewerSchemaError(unknown)
	}
	var pending []string
	for _, name := range names {
		if !slices.Contains(applied, name) {
			pending = append(pending, name)
		}
	}
	if !upgrade && len(pending) > 0 && len(applied) > 0 {
		// A database none applied to is being set up, not upgraded: no earlier
		// version runs on it.
		return storage.UpgradeByServeError(pending)
	}
	for _, name := range pending {
		if err := db.migrateOne(ctx, conn.Conn(), name); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

// UnknownMigrations returns the migrations the database records that this build does
// not have, in order.
func (db *DB) UnknownMigrations(ctx context.Context) ([]string, error) {
	_, unknown, err := db.appliedMigrations(ctx)
	return unknown, err
}

// appliedMigrations reads the migrations the database records: how many, and those of
// them this build does not have, in order.
func (db *DB) appliedMigrations(ctx context.Context) (applied int, unknown []string, err error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return 0, nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		return 0, nil, fmt.Errorf("read applied migrations: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, nil, fmt.Errorf("read applied migrations: %w", err)
	}
	for _, a := range all {
		if !slices.Contains(names, a) {
			unknown = append(unknown, a)
		}
	}
	return len(all), unknown, nil
}

// checkSchema returns an error unless the database has exactly this build's migrations.
func (db *DB) checkSchema(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	applied, unknown, err := db.appliedMigrations(ctx)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return storage.NewerSchemaError(unknown)
	}
	if applied < len(names) {
		return fmt.Errorf("the database's schema predates this hookdedup's (%d of its %d migrations applied): "+
			"start hookdedup serve of this version on it first: %w", applied, len(names), storage.ErrAuditSchema)
	}
	return nil
}

func (db *DB) migrateOne(ctx context.Context, conn *pgx.Conn, name string) error {
	body, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO migrations (name, applied_at) VALUES ($1, $2)`, name, db.Now().UnixMilli())
		return err
	})
}

// ownSchema refuses to set hookdedup up in a schema that already holds tables of
// something else: its first migration would fail on a name taken (users, for one) after
// others had made tables beside them, or, worse, succeed among another application's
// tables. A schema with hookdedup's migrations table is hookdedup's.
func ownSchema(ctx context.Context, conn *pgx.Conn) error {
	// pg_catalog, not information_schema, which shows a role only the tables it has a
	// privilege on; and hookdedup's migrations table by its columns, since other tools
	// name theirs migrations too. Asked once, so not prepared (QueryExecModeExec: unnamed,
	// and unlike the simple protocol, whatever standard_conforming_strings): a statement left prepared
	// on the pool's connection would be one more among intake's.
	var ours bool
	if err := conn.QueryRow(ctx, `SELECT count(*) = 2 FROM pg_attribute AS a
		JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relname = 'migrations' AND a.attnum > 0 AND NOT a.attisdropped
			AND ((a.attname = 'name' AND a.atttypid = 'text'::regtype) OR (a.attname = 'applied_at' AND a.atttypid = 'bigint'::regtype))`,
		pgx.QueryExecModeExec).
		Scan(&ours); err != nil {
		return fmt.Errorf("look for the migrations table: %w", err)
	}
	if ours {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1 LIMIT 6`,
		pgx.QueryExecModeExec)
	if err != nil {
		return fmt.Errorf("list the schema's tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list the schema's tables: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) > 5 {
		names = append(names[:5], "…")
	}
	return fmt.Errorf("the database holds tables hookdedup did not make (%s): give hookdedup an empty database of its own; nothing was changed",
		strings.Join(names, ", "))
}
