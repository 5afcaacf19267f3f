// Package postgres keeps hookdedup's state in a PostgreSQL database that several
// replicas share, reached with pgx. It owns its schema (migrations/, embedded) and is
// the only code that speaks PostgreSQL's SQL; the types it keeps are package storage's.
//
// Every method of storage.Store is pinned by storage/enginetest, which runs against this
// engine as against SQLite.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// Options tunes Open. The zero value is the production default.
type Options struct {
	// MaxConns bounds the pool's connections to the server. Default: the URL's
	// pool_max_conns, or 16.
	MaxConns int32
	// BusyTimeout is how long a write may take, waiting for locks included, before it
	// fails with storage.ErrWriteTimeout and nothing of it is stored. Default 5s.
	BusyTimeout time.Duration
	// Logger receives what the caller of a method cannot be told. Default: nothing is
	// logged.
	Logger *slog.Logger
	// MustExist makes Open refuse, with an error wrapping storage.ErrNoDatabase, a
	// database that hookdedup never set up (no migrations table), instead of setting
	// it up: every command but serve works on a database that exists. It refuses as
	// well one that an earlier version set up (storage.UpgradeByServeError), instead
	// of upgrading it under that version's replicas.
	MustExist bool
	// NoUpgrade sets up a database that hookdedup never set up, but refuses one that an
	// earlier version set up, as MustExist does: a command that may create the
	// database (user add) must not migrate it under that version's replicas.
	NoUpgrade bool
	// Clock is this machine's wall clock, default time.Now: the DB's Now before it has
	// read the server's clock, and what it says is off about it. Tests give one that is
	// off, or stepped.
	Clock func() time.Time
	// NoMigrate opens the database as it is, never changing its schema, for a
	// verifier of the audit log that must not change what it checks. Open then asks of
	// the schema only the audit log's hash chain, whatever migrations it lacks or has
	// that this build does not know, as SQLite's OpenAuditFile does: it refuses a
	// database hookdedup never set up (storage.ErrNoDatabase) and one whose schema
	// predates the chain (storage.ErrAuditSchema). Methods other than the audit log's
	// may then find a schema without what they need.
	NoMigrate bool
}

// connectTimeout bounds connecting to a server when the URL sets no connect_timeout:
// a server that does not answer (a host down, packets dropped) is an error, not a
// start that hangs.
const connectTimeout = time.Minute

// DB is a hookdedup database on a PostgreSQL server. Its methods are safe for
// concurrent use, and any number of DBs, in any number of processes, may share one
// database.
type DB struct {
	// Now is the clock every method uses: the database server's, as this machine
	// reads it (clock.go). Tests replace it to move time.
	Now func() time.Time

	clock     clock
	closeOnce sync.Once

	pool        *pgxpool.Pool
	log         *slog.Logger
	busyTimeout time.Duration
	beginQuery  string            // how writeTx begins a transaction (beginSQL)
	locks       lockSpace         // the advisory locks of this installation (locks.go)
	bulkWake    chan struct{}     // a bulk action became ready to run here (bulk.go)
	auditMark   storage.AuditMark // how far AuditChain has checked the audit chain (auditlog.go)
	intake      intake            // Record's group commit
	// reconnected is when the pool's connections were last dropped for a server that
	// takes no writes (leaveReadOnly), as sinceBoot, which a step of the wall clock does
	// not move; 0 for never.
	reconnected atomic.Int64
	// readOnly logs leaveReadOnly's reconnects as every outage is logged (outage.Log,
	// which one caller at a time may use: readOnlyMu).
	readOnlyMu sync.Mutex
	readOnly   *outage.Log

	moneyRead func() // tests: runs once a reprocess has read its keys' money (release.go)
}

var _ storage.Store = (*DB)(nil)

// Open connects to the database that dsn names (postgres:// or postgresql://, with
// pgx's parameters) and brings its schema up to date, under a lock, so that replicas
// starting together migrate once. It refuses a database whose schema has migrations
// this build does not know (a newer hookdedup migrated it). A connection error never
// shows the URL's password.
//
// Connecting to a server takes at most the URL's connect_timeout, or connectTimeout
// when it sets none. Nothing else is bounded but by ctx: waiting while another process
// migrates, and a migration, however long its index builds or lock waits take, run
// until they end or ctx does (the process is stopped), each logged every so often with
// what holds it up. A migration that ctx ends rolls back whole.
func Open(ctx context.Context, dsn string, opt Options) (*DB, error) {
	where := Redact(dsn)
	if unencodedUserinfo(dsn) {
		return nil, fmt.Errorf("open database %s: the URL has an @ where its host should be: percent-encode the password's /, ?, # and @ (%%2F, %%3F, %%23, %%40)", where)
	}
	// pgx knows the schemes in lower case only; hookdedup takes POSTGRES:// as well.
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok {
		dsn = strings.ToLower(scheme) + "://" + rest
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: the URL does not parse as a PostgreSQL connection string%s", where, parseReason(err))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 && !setsConnectTimeout(dsn) && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		cfg.ConnConfig.ConnectTimeout = connectTimeout // 0 in either: wait as long as it takes
	}
	boundLookup(&cfg.ConnConfig.Config)
	switch {
	case opt.MaxConns > 0:
		cfg.MaxConns = opt.MaxConns
	case !strings.Contains(dsn, "pool_max_conns="):
		cfg.MaxConns = 16 // the URL's pool_max_conns otherwise
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		useFastArrays(c.TypeMap())
		return probeDeadClients(ctx, c)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", where, err)
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 5 * time.Second
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	db := &DB{pool: pool, log: opt.Logger.With("component", "storage"), busyTimeout: opt.BusyTimeout,
		beginQuery: beginSQL(opt.BusyTimeout)}
	db.clock = clock{machine: opt.Clock, stop: make(chan struct{}), done: make(chan struct{}),
		fails: outage.New(db.log, slog.LevelWarn,
			"could not read the database server's clock; keeping the time of the last reading, or this machine's before the first",
			"the database server's clock read again")}
	db.Now = db.clock.now
	db.readOnly = outage.New(db.log, slog.LevelWarn,
		"the database server takes no writes: connecting anew, to the server that does if the URL names one",
		"the database server takes writes again")
	db.bulkWake = make(chan struct{}, 1)
	if err := db.open(ctx, opt); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", where, err)
	}
	db.setClock(ctx)
	go db.keepClock()
	db.intake.start(db)
	return db, nil
}

// open checks the schema (MustExist, NoMigrate) and brings it up to date, when it may.
func (db *DB) open(ctx context.Context, opt Options) error {
	// Every table is made and looked for in the first schema of the search_path that
	// exists: with none, PostgreSQL would say only that none was selected, and a
	// command that looks for hookdedup's tables that it never set the database up.
	var schema *string
	var path string
	if err := db.pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`, pgx.QueryExecModeExec).Scan(&schema, &path); err != nil {
		return err
	}
	if schema == nil {
		return fmt.Errorf("the search_path (%s) names no schema of this database that this role may use: create it (CREATE SCHEMA … AUTHORIZATION the role), or correct search_path in the URL", path)
	}
	db.locks = lockSpaceOf(*schema)
	if opt.MustExist || opt.NoMigrate {
		// Looked for in that schema alone: by the search_path, a migrations table of a
		// later schema's installation would be found, and the empty first schema, where
		// every table is made, then set up as new.
		var set bool
		if err := db.pool.QueryRow(ctx, `SELECT to_regclass(format('%I.migrations', current_schema())) IS NOT NULL`).Scan(&set); err != nil {
			return err
		}
		if !set {
			return fmt.Errorf("hookdedup never set this database up: %w", storage.ErrNoDatabase)
		}
	}
	if opt.NoMigrate {
		return db.checkAuditSchema(ctx)
	}
	return db.migrate(ctx, !opt.MustExist && !opt.NoUpgrade)
}

// Close waits for the deliveries queued for intake's writers to commit, then closes the
// pool's connections, waiting for those in use to come back. Closing again does
// nothing.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.intake.stop()
		close(db.clock.stop)
		<-db.clock.done
		db.pool.Close()
	})
	return nil
}

// Clock returns the time every method takes for now.
func (db *DB) Clock() time.Time { return db.Now() }

// Ping reports whether the database can commit a write now (readiness): the server
// answers, it is a primary, not a standby that a failover left behind, which would
// refuse every write, and a write commits.
func (db *DB) Ping(ctx context.Context) error {
	var standby bool
	if err := db.pool.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	if standby {
		db.leaveReadOnly()
		return errors.New("ping database: the server is a standby (read-only)")
	}
	// A primary may refuse writes too (default_transaction_read_only set by a
	// maintenance or failover script, a role without the privilege): only a commit
	// shows that deliveries can be stored. The row is SQLite's readiness row.
	if _, err := db.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('readyz', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, strconv.FormatInt(db.Now().UnixMilli(), 10)); err != nil {
		if readOnlyServer(err) {
			db.leaveReadOnly()
		}
		return fmt.Errorf("ping database: %w", err)
	}
	db.readOnlyMu.Lock()
	db.readOnly.Note(time.Now(), nil)
	db.readOnlyMu.Unlock()
	return nil
}

// errReadOnly is why leaveReadOnly reconnects, for its log.
var errReadOnly = errors.New("a write was refused as the server takes none (a standby, or a primary set read-only)")

// reconnectEvery bounds how often leaveReadOnly drops the pool's connections: a server
// that stays read-only, with no writable one to go to, is connected to anew at most so
// often, not once per refused write.
const reconnectEvery = time.Second

// leaveReadOnly drops the pool's connections (those in use once they come back) after
// the server refused a write as one that takes none: a standby, or a primary fenced
// read-only by a switchover, whose connections stay up. The pool would otherwise go on
// using them, every write refused, until their lifetime ran out, an hour; connected
// anew, it reaches the server that takes writes now, which the URL finds by a name
// that follows the primary or by target_session_attrs=read-write.
func (db *DB) leaveReadOnly() {
	now := int64(sinceBoot())
	last := db.reconnected.Load()
	if (last != 0 && now-last < int64(reconnectEvery)) || !db.reconnected.CompareAndSwap(last, now) {
		return
	}
	db.readOnlyMu.Lock()
	db.readOnly.Note(time.Now(), errReadOnly)
	db.readOnlyMu.Unlock()
	db.pool.Reset()
}

// parseReason is what pgx says is wrong with a connection string, after ": ", or "" when
// that could quote the string itself: pgx's message names the string, and the error it
// wraps (a URL that does not parse) may quote it whole, password and all.
func parseReason(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "`: ")
	if i < 0 {
		return ""
	}
	reason := msg[i+len("`: "):]
	if strings.ContainsAny(reason, "@`") || strings.Contains(reason, "://") {
		return ""
	}
	return ": " + reason
}

// secretParams are the parameters of a connection URL that hold a secret: pgx takes
// the password from the query as well as from the user part (postgres://u@h/db?password=…).
var secretParams = []string{"password", "sslpassword"}

// lookupHost, when set, resolves the server's host names in place of pgx's resolver:
// tests replace it with one that does not answer.
var lookupHost pgconn.LookupFunc

// boundLookup holds the look-up of the server's host name to the connect timeout, as
// pgx holds the connection that follows it: pgx resolves the name under the caller's
// context alone, and a DNS server that does not answer (unreachable behind a firewall
// that drops its packets, or a resolver of the C library that retries for ever) would
// hold a start, or every reconnect of the pool, for as long as it does.
func boundLookup(cfg *pgconn.Config) {
	lookup := cfg.LookupFunc
	if lookupHost != nil {
		lookup = lookupHost
	}
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		cfg.LookupFunc = lookup
		return
	}
	cfg.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		addrs, err := lookup(ctx, host)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("look up %s: no answer within the connect timeout (%s): %w", host, timeout, err)
		}
		return addrs, err
	}
}

// clientProbes are the server's TCP keepalive settings that every connection asks for,
// unless the operator set them: the server probes a connection idle for 30 s every 10 s,
// and ends it after 3 probes unanswered, about a minute after its replica's machine
// went (a power cut, a network cut), which no FIN or RST tells it of. Until then the
// session's transaction holds what it had taken: the locks of its keys, which keep
// every other replica's intake of them waiting, and answering 503, or intake's own
// lock, taken alone by a large request, which keeps all intake waiting; and the
// sweeps' and roll-ups' locks, which they skip their rounds behind. The operating
// system's defaults, which the server keeps, wait over two hours.
var clientProbes = [...][2]string{{"tcp_keepalives_idle", "30"}, {"tcp_keepalives_interval", "10"}, {"tcp_keepalives_count", "3"}}

// sqlProbeDeadClients sets each of clientProbes that still has its built-in default on
// the connection. The server says where a value came from (pg_settings.source): one the
// connection string gives, as a parameter or in options however it is spelled there
// (-c tcp-keepalives-idle=60, PGOPTIONS), is the client's, and one of the server's
// configuration, the database's or the role's (ALTER ROLE … SET) is theirs; each is
// the operator's, and kept.
var sqlProbeDeadClients = func() string {
	values := make([]string, len(clientProbes))
	for i, p := range clientProbes {
		values[i] = "('" + p[0] + "', '" + p[1] + "')"
	}
	return `SELECT set_config(s.name, p.value, false) FROM (VALUES ` + strings.Join(values, ", ") + `) AS p(name, value)
	JOIN pg_settings AS s ON s.name = p.name WHERE s.source = 'default'`
}()

// probeDeadClients sets clientProbes on the new connection c. Set by a statement rather
// than in the startup message, which a pooler in between (PgBouncer) refuses parameters
// of that it does not know; in the simple protocol, which leaves no prepared statement
// on a pooler's server connection.
func probeDeadClients(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, sqlProbeDeadClients, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("set the server's probes of the connection: %w", err)
	}
	return nil
}

// setsConnectTimeout reports whether dsn sets connect_timeout itself, as a URL's query
// parameter or a keyword of the keyword/value form: 0 there is the operator's "wait as
// long as it takes", which Open keeps. The word elsewhere (in an application_name, a
// password) sets nothing.
func setsConnectTimeout(dsn string) bool {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		return err == nil && u.Query().Has("connect_timeout")
	}
	return connectTimeoutKeyword.MatchString(dsn)
}

var connectTimeoutKeyword = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// HoldsSecret reports whether the connection URL dsn itself holds a secret: a password
// in its user part, or a parameter of secretParams in its query, in any case (Redact
// masks the same). A URL that does not parse holds none that pgx would use: Open
// refuses it.
func HoldsSecret(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	if _, set := u.User.Password(); set {
		return true
	}
	for k := range u.Query() {
		if slices.Contains(secretParams, strings.ToLower(k)) {
			return true
		}
	}
	return false
}

// unencodedUserinfo reports whether dsn has an "@" past the end of its host part, or
// two in it: a
// password holding "/", "?" or "#" that is not percent-encoded ends the host part early
// (postgres://app:2024/Summer!@db/hookdedup reads as host app, port 2024), and the
// password then stands in what parses as the path or the query, where no redaction
// finds it and a connection error quotes it.
func unencodedUserinfo(dsn string) bool {
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	if end >= 0 && strings.Contains(rest[end:], "@") {
		return true
	}
	// Two @ in the authority: Go's URL parser takes the last as the end of the user
	// part, pgx the first, and would quote the rest of the password as the host.
	if end < 0 {
		end = len(rest)
	}
	return strings.Count(rest[:end], "@") > 1
}

// Redact is dsn fit for a message or a log: the password of its user part, and every
// parameter that holds a secret, replaced by xxxxx.
func Redact(dsn string) string {
	if unencodedUserinfo(dsn) {
		return "(a database URL with an unencoded password)"
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a database URL that does not parse)"
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			if slices.Contains(secretParams, strings.ToLower(k)) {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
