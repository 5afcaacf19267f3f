package postgrestest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

func TestMain(m *testing.M) {
	postgrestest.Main(m, func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, contractSchema)
		return err
	})
}

// mustPool opens a pool of at most maxConns connections to a fresh database of t's,
// closed when t ends.
func mustPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(postgrestest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestNewDatabase: each test gets a database of its own, cloned from the template that
// TestMain's setup prepared, reachable with pgx over TCP.
func TestNewDatabase(t *testing.T) {
	a, b := mustPool(t, 2), mustPool(t, 2)
	ctx := t.Context()

	var nameA, nameB string
	if err := a.QueryRow(ctx, "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, "SELECT current_database()").Scan(&nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB {
		t.Fatalf("both databases are %q, want two", nameA)
	}

	// The template's schema is in both; what one writes is not in the other.
	if _, err := a.Exec(ctx, "INSERT INTO claims (source, key, delivery, claimed_at, expires_at, next_attempt_at) VALUES ('ota', 'k', 1, now(), now(), now())"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM claims").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the second database holds %d claims written to the first", n)
	}

	// The server is the real thing: durable commits, as in production.
	for setting, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "listen_addresses": "127.0.0.1"} {
		var got string
		if err := a.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}
