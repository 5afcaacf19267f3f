package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// runMigrate copies the configured SQLite database into an empty PostgreSQL database
// (--to), the way a property that outgrew one machine moves to several replicas: every
// table, in one snapshot of the file and one transaction of PostgreSQL, with each
// table's count checked on both sides. serve must be stopped: a delivery it stored after
// the snapshot would not be copied.
func runMigrate(ctx context.Context, args []string, e env) error {
	flags := newFlags("migrate", e)
	to := flags.fs.String("to", "", "postgres://… URL of an empty PostgreSQL database to copy into (required)")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	const migrateUsage = "usage: hookdedup migrate --to postgres://USER:PASSWORD@HOST:5432/DB [--config FILE | --database FILE]"
	if p := argsProblem("migrate", nil, pos, false); p != "" {
		return errors.New(p + " (the PostgreSQL database goes with --to)\n" + migrateUsage)
	}
	if *to == "" {
		return errors.New("--to is required: the postgres:// URL of the empty PostgreSQL database to copy into\n" + migrateUsage)
	}
	if !isPostgres(*to) {
		// A connection string in another form (host=… password=…, postgres:/…) holds
		// its password where no redaction finds it: named for what it is, never shown.
		if what := serverForm(*to); what != "" {
			return fmt.Errorf("--to: %s (not shown, as it may hold a password): give the postgres:// (or postgresql://) URL of an empty PostgreSQL database: %s",
				what, postgresForm)
		}
		return fmt.Errorf("--to %s: give the postgres:// (or postgresql://) URL of an empty PostgreSQL database", displayPath(*to))
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	if isPostgres(cfg.Database) {
		return fmt.Errorf("the database is %s, already PostgreSQL: migrate copies a SQLite file into PostgreSQL", displayPath(cfg.Database))
	}
	if inUse, err := sqlite.InUse(cfg.Database); err != nil {
		return err
	} else if inUse {
		return fmt.Errorf("%s is open in another process: stop serve (and any other hookdedup command using it), then migrate",
			displayPath(cfg.Database))
	}
	// The file is read as it is, or through an upgraded copy beside it when an earlier
	// version made it: it is never written, so that the earlier setup can run on.
	src, err := sqlite.OpenSnapshot(ctx, cfg.Database)
	if errors.Is(err, storage.ErrNoDatabase) {
		return noDatabaseError{path: cfg.Database}
	}
	if err != nil {
		return err
	}
	defer src.Close()
	// A database an earlier version set up is refused, not upgraded: its replicas may
	// still run on it, and the copy, which needs it empty, would then refuse it anyway,
	// having changed its schema under them.
	dst, err := postgres.Open(ctx, *to, postgres.Options{Logger: cliLogger(e), NoUpgrade: true})
	if errors.Is(err, storage.ErrUpgradeByServe) {
		// Upgraded by serve, it would still hold what the earlier version stored, and the
		// copy needs an empty database.
		return fmt.Errorf("%w; migrate copies into an empty database only: give --to a new one (createdb), unless this one holds nothing yet", err)
	}
	if err != nil {
		return err
	}
	defer dst.Close()
	copied, err := dst.Import(ctx, src, func(table string, rows int64) {
		fmt.Fprintf(e.stdout, "  %-20s %s\n", table, count(rows, "row", "rows"))
	})
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w (nothing was committed)", displayPath(cfg.Database), displayPath(*to), err)
	}
	fmt.Fprintf(e.stdout, "copied %s into %s: %s; every table's rows counted on both sides\n",
		displayPath(cfg.Database), displayPath(*to), copySummary(copied))
	fmt.Fprintf(e.stdout, "next: set database = \"postgres://…\" for every replica and start them; keep %s as it is until they run\n",
		displayPath(cfg.Database))
	return nil
}

// copySummary names what a copy moved that a person counts: deliveries, keys, users.
func copySummary(copied []storage.TableCopy) string {
	n := map[string]int64{}
	for _, c := range copied {
		n[c.Table] = c.Copied
	}
	return strings.Join([]string{count(n["deliveries"], "delivery", "deliveries"), count(n["claims"], "key", "keys"),
		count(n["attempts"], "attempt", "attempts"), count(n["users"], "user", "users"), count(n["tokens"], "token", "tokens"),
		count(n["audit_log"], "audit row", "audit rows"), count(n["settings"], "setting", "settings")}, ", ")
}
