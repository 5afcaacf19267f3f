package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

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
	// The server's or the role's own bounds (statement_timeout, lock_timeout,
	// transaction_timeout) are lifted on this connection while it migrates, and put
	// back before it goes back to the pool: a migration cut by one would roll back and
	// be cut at the same place at every start, and a replica waiting for another's
	// would give up while the upgrade runs.
	if _, err := conn.Exec(ctx, sqlSetTimeouts, pgx.QueryExecModeExec, "0"); err != nil {
		return fmt.Errorf("lift the server's timeouts for the migrations: %w", err)
	}
	defer func() {
		rctx, cancel := rollbackContext(ctx)
		defer cancel()
		if _, err := conn.Exec(rctx, sqlResetTimeouts); err != nil {
			// Not back in the pool with no bound: closed, the pool drops it.
			conn.Conn().Close(rctx)
		}
	}()
	// A session lock, taken and given back on this connection, which goes back to the
	// pool only after the unlock.
	if err := db.lockMigrations(ctx, conn.Conn()); err != nil {
		return err
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
	if len(pending) > 0 {
		db.log.Info("migrating the schema", "migrations", len(pending), "first", pending[0])
	}
	for _, name := range pending {
		if err := db.migrateOne(ctx, conn.Conn(), name); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("migration %s interrupted (%w): rolled back, the next start runs it again", name, context.Cause(ctx))
			}
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

// sessionTimeouts are the settings that bound a statement, a lock wait or a
// transaction, as far as the server has them (transaction_timeout came with
// PostgreSQL 17).
const sessionTimeouts = `name IN ('statement_timeout', 'lock_timeout', 'transaction_timeout')`

var (
	// sqlSetTimeouts sets each of sessionTimeouts to $1 for the session.
	sqlSetTimeouts = `SELECT count(set_config(name, $1, false)) FROM pg_settings WHERE ` + sessionTimeouts
	// sqlResetTimeouts gives each of sessionTimeouts back the value the server, the
	// database or the role gives the session.
	sqlResetTimeouts = `SELECT count(set_config(name, reset_val, false)) FROM pg_settings WHERE ` + sessionTimeouts
)

// waitReport is how often a migration, or a wait for another process's, is logged
// while it lasts: a slow upgrade is seen, and what holds it up is named.
var waitReport = 15 * time.Second

// lockMigrations takes migrateLock on conn, waiting for as long as another process
// holds it (that process is migrating the schema) unless ctx ends first: the wait is
// logged at once and every waitReport, naming the holder.
func (db *DB) lockMigrations(ctx context.Context, conn *pgx.Conn) error {
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, migrateLock).Scan(&got); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if got {
		return nil
	}
	const waiting = "waiting for the migration lock: another process is migrating the schema"
	var holder string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(`+session+`, '; '), '') FROM pg_stat_activity
		WHERE pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1)`,
		migrateLock).Scan(&holder); err != nil {
		return fmt.Errorf("look for the migration lock's holder: %w", err)
	}
	db.log.Warn(waiting, "held_by", holder)
	defer db.reportWait(ctx, conn.PgConn().PID(), slog.LevelWarn, waiting, nil)()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for the migration lock, which another process migrating the schema holds: interrupted (%w)", context.Cause(ctx))
		}
		return fmt.Errorf("wait for the migration lock: %w", err)
	}
	return nil
}

// reportWait logs msg with attrs, as level, every waitReport until the function it
// returns is called, with how long it has lasted and the sessions that the server
// process pid waits for a lock of, if any, or else those heldUpBy last held (nil: none
// kept). It asks the server on another connection of the pool, and leaves the sessions
// out when none comes within a second (a pool of one connection).
func (db *DB) reportWait(ctx context.Context, pid uint32, level slog.Level, msg string, heldUpBy *atomic.Pointer[string], attrs ...any) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(waitReport)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				a := append(slices.Clip(attrs), "for", time.Since(start).Round(time.Second))
				by := db.blockers(ctx, pid)
				if by == "" && heldUpBy != nil {
					if last := heldUpBy.Load(); last != nil {
						by = *last
					}
				}
				if by != "" {
					a = append(a, "blocked_by", by)
				}
				db.log.Log(ctx, level, msg, a...)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// session describes a row of pg_stat_activity in a log line: the server process, the
// client's application and address, its state, how long its transaction has been open
// and its statement's first word (SELECT, COPY, ALTER …). Never the statement's text,
// which may hold what another client sent (ALTER ROLE … PASSWORD '…').
const session = `format('pid %s (%s%s) %s, transaction open %s, %s', pid,
	coalesce(nullif(application_name, ''), 'no application name'), coalesce(', ' || host(client_addr), ''),
	coalesce(state, 'unknown state'), coalesce(date_trunc('second', now() - xact_start)::text, 'none'),
	coalesce(nullif(upper(substring(query from '^[[:space:]]*([A-Za-z]+)')), ''), 'no statement'))`

// blockers describes the sessions that the server process pid waits for a lock of,
// "" when it waits for none or they cannot be read now.
func (db *DB) blockers(ctx context.Context, pid uint32) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+session+` FROM pg_stat_activity WHERE pid = ANY (pg_blocking_pids($1)) ORDER BY pid`,
		pgx.QueryExecModeExec, int32(pid))
	if err != nil {
		return ""
	}
	by, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return ""
	}
	return strings.Join(by, "; ")
}

// UnknownMigrations returns the migrations the database records that this build does
// not have, in order.
func (db *DB) UnknownMigrations(ctx context.Context) ([]string, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var unknown []string
	for _, a := range all {
		if !slices.Contains(names, a) {
			unknown = append(unknown, a)
		}
	}
	return unknown, nil
}

// auditChainMigration is the migration that made the audit log, a hash chain from its
// first row: every schema since has it.
const auditChainMigration = "migrations/0002_everything_else.sql"

// checkAuditSchema returns an error wrapping storage.ErrAuditSchema unless the database
// records auditChainMigration. It asks nothing more, as SQLite's OpenAuditFile does: a
// schema that lacks later migrations (serve not upgraded yet) or has some this build does
// not know (the verifier older than the replicas) holds a chain it can check all the same.
func (db *DB) checkAuditSchema(ctx context.Context) error {
	var chained bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM migrations WHERE name = $1)`, auditChainMigration).
		Scan(&chained); err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	if !chained {
		return fmt.Errorf("it lacks migration %s, which made the audit log: %w", path.Base(auditChainMigration), storage.ErrAuditSchema)
	}
	return nil
}

func (db *DB) migrateOne(ctx context.Context, conn *pgx.Conn, name string) error {
	body, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	pid := conn.PgConn().PID()
	// The sessions an attempt waited for: the migration spends most of a long wait in
	// the pauses between its attempts, when it waits for no lock, and a report that
	// fell in one would not name what holds it up. Each attempt that still waits after
	// blockerProbe says who it waits for, and the reports name them until an attempt
	// finds others.
	var heldUpBy atomic.Pointer[string]
	defer db.reportWait(ctx, pid, slog.LevelInfo, "applying migration", &heldUpBy, "migration", name)()
	for {
		probe := time.AfterFunc(blockerProbe, func() {
			if by := db.blockers(ctx, pid); by != "" {
				heldUpBy.Store(&by)
			}
		})
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrationLockTimeoutSQL); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			if step := migrationSteps[name]; step != nil {
				if err := step(ctx, tx); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO migrations (name, applied_at) VALUES ($1, $2)`, name, db.Now().UnixMilli())
			return err
		})
		probe.Stop() // one that has begun stores what it finds, which no report reads once this ends
		if !lockTimedOut(err) {
			return err
		}
		// A table's lock not granted within migrationLockTimeout: rolled back whole,
		// and tried again after a pause, for as long as it takes.
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(migrationRetryPause):
		}
	}
}

// migrationSteps are the steps of migrations that SQL cannot take, each run after its
// migration's SQL, in its transaction.
var migrationSteps = map[string]func(context.Context, pgx.Tx) error{
	"migrations/0027_money_magnitude.sql": countMagnitudes,
	"migrations/0028_stats_minor.sql":     countStatsMinor,
}

// migrationLockTimeout bounds each wait of a migration for a lock. A request for a
// table's exclusive lock (an ALTER TABLE) waiting behind a long reader (a pg_dump, a
// session left idle in a transaction) queues every later request of that table behind
// it: the running replicas' writes would wait with it, and fail after their busy
// timeout, for as long as the reader runs. Bounded well under any busy timeout, the
// migration gives its place up, rolled back, and asks again after migrationRetryPause,
// leaving the replicas their turn in between.
const migrationLockTimeout = 500 * time.Millisecond

// blockerProbe is how long into each attempt a migration looks for the sessions it
// waits for, within migrationLockTimeout.
const blockerProbe = migrationLockTimeout / 5

// migrationRetryPause is how long a migration that could not have its locks waits
// before it runs again.
const migrationRetryPause = time.Second

var migrationLockTimeoutSQL = fmt.Sprintf("SET LOCAL lock_timeout = %d", migrationLockTimeout.Milliseconds())

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
