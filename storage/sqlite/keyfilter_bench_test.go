package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkKeyFilter_Build builds the writer's filter of forensic keys from a database
// holding a million business and correlation keys, as a process that starts does, and
// reports its size in memory.
func BenchmarkKeyFilter_Build(b *testing.B) {
	const keys = 1_000_000
	ctx := context.Background()
	db, err := Open(filepath.Join(b.TempDir(), "keys.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	seen := time.Now().UnixMilli()
	if _, err := db.write.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO business_keys (source, hash, delivery, seen_at) SELECT 'ota', randomblob(32), i, ?2 FROM n`, keys/2, seen); err != nil {
		b.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at) SELECT 'double-refund', randomblob(32), 'ota', i, ?2 FROM n`, keys/2, seen); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var f *keyFilter
	for range b.N {
		if f, err = buildKeyFilter(ctx, db.read); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if f.built != keys {
		b.Fatalf("built from %d keys, want %d", f.built, keys)
	}
	b.ReportMetric(float64(f.bytes())/(1<<20), "MiB")
	// The rate of false "maybe"s, on keys the database does not hold.
	maybe := 0
	for i := range 100_000 {
		if f.mayHold(filterHash("", "ota", fmt.Sprint("absent-", i))) {
			maybe++
		}
	}
	b.ReportMetric(float64(maybe)/1000, "%maybe")
}
