package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// BenchmarkSuspectCounts times the console's counts of suspects (SuspectCounts) and
// the open suspects' alert (OpenSuspects) over 1 M suspects (HOOKDEDUP_SUSPECTS_SCALE
// changes the count), as the SQLite engine's benchmark of that name does: *NotFolded
// before any roll-up, *Folded after it, with the last 1,000 flagged since. Run it alone:
//
//	go test -run '^$' -bench '^BenchmarkSuspectCounts$' -benchtime 5x ./storage/postgres/
func BenchmarkSuspectCounts(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("HOOKDEDUP_SUSPECTS_SCALE")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	url := postgrestest.NewDatabase(b)
	db, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO suspects (kind, delivery, other, source, property, booking, amount, currency,
	flagged_at, state)
SELECT CASE n % 3 WHEN 0 THEN 'business_key' WHEN 1 THEN 'correlation' ELSE 'late_duplicate' END,
	n, n - 1, 'src-' || (n % 4), 'HTL-' || (n % 50), 'BK-' || n, (n % 5000) || '.' || lpad((n % 100)::text, 2, '0'),
	CASE n % 4 WHEN 0 THEN 'EUR' WHEN 1 THEN 'USD' WHEN 2 THEN 'JPY' ELSE '' END, 1764500000000 + n * 1000,
	CASE WHEN n % 10 < 6 THEN 'open' WHEN n % 10 < 8 THEN 'confirmed' ELSE 'dismissed' END
FROM generate_series(1, $1) AS n`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE suspects`); err != nil {
		b.Fatal(err)
	}
	enginetest.BenchSuspectCounts(b, db, n, func() {
		if _, err := conn.Exec(ctx, `INSERT INTO suspects (kind, delivery, source, amount, currency, flagged_at)
SELECT 'business_key', n, 'src-1', '10.00', 'EUR', 0 FROM generate_series(1, 1000) AS n`); err != nil {
			b.Fatal(err)
		}
	})
}
