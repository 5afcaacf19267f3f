package sqlite_test

import (
	"database/sql"
	"os"
	"strconv"
	"testing"

	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkSuspectCounts times the console's counts of suspects (SuspectCounts) and
// the open suspects' alert (OpenSuspects) over 1 M suspects (HOOKDEDUP_SUSPECTS_SCALE
// changes the count): four sources, three kinds, three states, three currencies and
// none. *NotFolded read them before any roll-up, as a database from before the running
// totals does; *Folded after the roll-up, with the last
// 1,000 flagged since, as a running server has them. Run it alone:
//
//	go test -run '^$' -bench '^BenchmarkSuspectCounts$' -benchtime 10x ./storage/sqlite/
func BenchmarkSuspectCounts(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("HOOKDEDUP_SUSPECTS_SCALE")); err == nil && v > 0 {
		n = v
	}
	db := storagetest.Open(b)
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
INSERT INTO suspects (kind, delivery, other, source, property, booking, amount, currency, flagged_at, state)
SELECT CASE n % 3 WHEN 0 THEN 'business_key' WHEN 1 THEN 'correlation' ELSE 'late_duplicate' END,
	n, n - 1, 'src-' || (n % 4), 'HTL-' || (n % 50), 'BK-' || n, (n % 5000) || '.' || printf('%02d', n % 100),
	CASE n % 4 WHEN 0 THEN 'EUR' WHEN 1 THEN 'USD' WHEN 2 THEN 'JPY' ELSE '' END, 1764500000000 + n * 1000,
	CASE WHEN n % 10 < 6 THEN 'open' WHEN n % 10 < 8 THEN 'confirmed' ELSE 'dismissed' END FROM i`, n); err != nil {
		b.Fatal(err)
	}
	enginetest.BenchSuspectCounts(b, db, n, func() {
		if _, err := raw.Exec(`WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1000)
INSERT INTO suspects (kind, delivery, source, amount, currency, flagged_at) SELECT 'business_key', n, 'src-1', '10.00', 'EUR', 0 FROM i`); err != nil {
			b.Fatal(err)
		}
	})
}
