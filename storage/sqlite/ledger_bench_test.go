package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkLedger times the ledger over 30 days of 5 M deliveries (HOOKDEDUP_LEDGER_SCALE
// changes the count): three sources, 400 properties, three currencies, one delivery in
// seven a duplicate with an amount, one duplicate in 60 a money mismatch, and 5,000
// suspects, all folded into the daily totals as a running server would have. The
// database is kept in HOOKDEDUP_LEDGER_DB when that names a file (filling it takes
// minutes), in a temp dir otherwise. Run it alone:
//
//	HOOKDEDUP_LEDGER_DB=/tmp/ledger-5m.db go test -run '^$' -bench '^BenchmarkLedger$' -benchtime 20x ./storage/
func BenchmarkLedger(b *testing.B) {
	n := 5_000_000
	if v, err := strconv.Atoi(os.Getenv("HOOKDEDUP_LEDGER_SCALE")); err == nil && v > 0 {
		n = v
	}
	path := os.Getenv("HOOKDEDUP_LEDGER_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "ledger.db")
	}
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	db := storagetest.OpenPath(b, path, sqlite.Options{})
	fillLedger(b, db, n, start)
	b.ResetTimer()
	for _, bc := range []struct {
		name string
		f    storage.LedgerFilter
	}{
		{"30Days", storage.LedgerFilter{From: start, To: start.AddDate(0, 0, 30)}},
		{"30DaysOneSource", storage.LedgerFilter{Source: "psp", From: start, To: start.AddDate(0, 0, 30)}},
		{"30DaysOneProperty", storage.LedgerFilter{Property: "PROP-123", From: start, To: start.AddDate(0, 0, 30)}},
		{"30DaysOnePage", storage.LedgerFilter{From: start, To: start.AddDate(0, 0, 30), Limit: 500}},
		{"OneDay", storage.LedgerFilter{From: start.AddDate(0, 0, 10), To: start.AddDate(0, 0, 11)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var rows int
			for b.Loop() {
				l, err := db.Ledger(ctx, bc.f)
				if err != nil {
					b.Fatal(err)
				}
				rows = len(l.Rows)
			}
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

// fillLedger writes n deliveries over 30 days from start into db unless it holds them
// already, adds the suspects, and rolls everything up.
func fillLedger(b *testing.B, db *sqlite.DB, n int, start time.Time) {
	b.Helper()
	ctx := context.Background()
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	var have int
	if err := raw.QueryRow(`SELECT count(*) FROM deliveries`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have < n {
		t0 := time.Now()
		step := int64(30*24*time.Hour/time.Millisecond) / int64(n)
		for _, q := range []string{`
INSERT INTO deliveries (id, source, received_at, outcome, status, key, key_method, payload_hash, mismatch,
	money_mismatch, property, booking, event_status, amount, currency, headers, body)
WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2)
SELECT i, CASE i % 10 WHEN 0 THEN 'pms' WHEN 1 THEN 'psp' ELSE 'ota' END, ?3 + i * ?4,
	CASE WHEN i % 50 = 0 THEN 'rejected' WHEN i % 7 = 0 THEN 'duplicate' ELSE 'accepted' END, 200,
	'evt_' || i, 'event_id', 'h', i % 420 = 0, i % 420 = 0, 'PROP-' || (i % 400), 'BK-' || (i / 2), 'cancelled',
	CASE i % 3 WHEN 0 THEN '120.50' WHEN 1 THEN '99.99' ELSE '12000' END,
	CASE i % 3 WHEN 0 THEN 'EUR' WHEN 1 THEN 'USD' ELSE 'JPY' END, '{}', '{"i":' || i || '}'
FROM s`,
			`UPDATE delivery_seq SET last = (SELECT max(id) FROM deliveries)`,
			`INSERT INTO suspects (kind, delivery, other, source, property, booking, amount, currency, flagged_at, state)
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)
SELECT CASE i % 3 WHEN 0 THEN 'business_key' WHEN 1 THEN 'correlation' ELSE 'late_duplicate' END,
	i * (?2 / 5000), i * (?2 / 5000) - 1, 'ota', 'PROP-' || (i % 400), 'BK-' || i, '120.50', 'EUR',
	?3 + i * (?2 / 5000) * ?4, CASE i % 4 WHEN 0 THEN 'confirmed' WHEN 1 THEN 'dismissed' ELSE 'open' END
FROM s`,
		} {
			if _, err := raw.Exec(q, have+1, n, start.UnixMilli(), step); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("filled %d deliveries in %s", n-have, time.Since(t0))
	}
	t0 := time.Now()
	for {
		s, err := db.RollupStats(ctx, 200_000)
		if err != nil {
			b.Fatal(err)
		}
		l, err := db.RollupLedger(ctx, 200_000)
		if err != nil {
			b.Fatal(err)
		}
		if s == 0 && l == 0 {
			break
		}
	}
	b.Logf("rolled up in %s", time.Since(t0))
}
