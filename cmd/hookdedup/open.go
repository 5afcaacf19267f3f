package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
)

// noDatabaseError is a command's refusal to run on a database that does not exist. main
// prints it alone and exits 2.
type noDatabaseError struct{ path string }

func (e noDatabaseError) Error() string {
	return fmt.Sprintf("no database at %s (serve creates it; pass --database or --config)", displayPath(e.path))
}

func (e noDatabaseError) Unwrap() error { return storage.ErrNoDatabase }

// displayPath writes a configured path so that it reads as one: a bare name gets "./"
// (hookdedup.db is a file here, not a word of the sentence), and a path with spaces or
// unprintable characters is quoted. A PostgreSQL URL is shown without its password.
func displayPath(p string) string {
	if isPostgres(p) {
		return postgres.Redact(p) // a URL, whose password is never shown
	}
	if !filepath.IsAbs(p) && p != "." && p != ".." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") {
		p = "./" + p
	}
	if q := strconv.Quote(p); q != `"`+p+`"` || strings.ContainsAny(p, " ") {
		return q
	}
	return p
}

// cliLogger is what storage says during a command (that the database can be read by
// others, say): warnings and errors, on stderr.
func cliLogger(e env) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openExisting opens the configured database, which must exist; it creates nothing.
// Only serve, user add and restore make a database. Every other command reads or changes
// one that exists: run from the wrong directory, it would otherwise create an empty
// database there and report on that, as if nothing had ever arrived.
func openExisting(ctx context.Context, cfg config, e env) (storage.Store, error) {
	db, err := cfg.openDB(ctx, cliLogger(e), true, false)
	if errors.Is(err, storage.ErrNoDatabase) {
		return nil, noDatabaseError{path: cfg.Database}
	}
	return db, err
}

// storedSecrets is config.sources' supply of generated secrets: each is kept in db, and
// made there the first time it is asked for.
func storedSecrets(ctx context.Context, db storage.Store) func(name string) (string, error) {
	return func(name string) (string, error) {
		return db.SettingOrInit(ctx, "source."+name+".secret", newSecret)
	}
}

// existingSources builds the configured sources for a command that must not create a
// database. The database (which must exist) is opened only if a source's secret is kept
// in it, so that mistakes in the config are reported first and a config that holds every
// secret needs no database at all. The DB is nil when it was not opened; otherwise the
// caller closes it.
//
// needSecrets says whether the command uses the secrets (demo signs with them). key and
// sources do not, and run as the service's user on its server, where a secret_env
// variable is set in the service's unit, not in the shell: for them such a variable,
// unset, reads as a placeholder of the source's scheme (signature.Placeholder), which
// nothing shows or signs with.
func existingSources(ctx context.Context, cfg config, e env, needSecrets bool) ([]receiver.Source, storage.Store, error) {
	getenv := e.getenv
	if !needSecrets {
		placeholders := map[string]string{}
		for _, sc := range cfg.Sources {
			if sc.SecretEnv != "" {
				if s, err := sc.settle(); err == nil {
					placeholders[sc.SecretEnv] = signature.Placeholder(s.Signature)
				}
			}
		}
		getenv = func(name string) string {
			if v := e.getenv(name); v != "" {
				return v
			}
			return placeholders[name]
		}
	}
	var db storage.Store
	var openErr error
	sources, err := cfg.sources(getenv, func(name string) (string, error) {
		if db == nil {
			if db, openErr = openExisting(ctx, cfg, e); openErr != nil {
				return "", openErr
			}
		}
		return storedSecrets(ctx, db)(name)
	})
	if openErr != nil {
		// Said as it is, not as a mistake in the source's secret.
		return nil, nil, openErr
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, nil, err
	}
	return sources, db, nil
}
