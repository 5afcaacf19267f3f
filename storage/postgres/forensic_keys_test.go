package postgres_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestForensicKeys_DeletedUnderPublication: an operator who publishes the database's
// tables for logical replication (a move to another server or major version, a
// managed provider's blue/green switch, change data capture) must still be able to
// release a key and sweep old forensic keys. PostgreSQL refuses a DELETE of a
// published table that has no replica identity: every table needs a primary key, or
// another identity, for its deletes to be replicated.
func TestForensicKeys_DeletedUnderPublication(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(ctx, `CREATE PUBLICATION everything FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	d := businessDelivery("evt_1", "B")
	d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: "R", Window: time.Hour}}
	if err := db.Record(ctx, d, opt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "resend"}); err != nil {
		t.Fatalf("release under a publication: %v", err)
	}
	if err := db.Record(ctx, businessDelivery("evt_2", "B2"), opt); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SweepBusinessKeys(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Errorf("sweep of business keys under a publication: %d, %v; want 1 deleted", n, err)
	}
	if n, err := db.SweepCorrelationKeys(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Errorf("sweep of correlation keys under a publication: %d, %v; want 1 deleted", n, err)
	}
}

// TestForensicKeys_LookupSeeksItsSourceAndRule: a business key is looked up among its
// own source's, a correlation key among its own rule's, in one seek of an index,
// however many rows another source or rule holds of the same hash text. The hash is of
// the key's fields alone: sources that share them (one provider's events sent to two
// sources), or rules that read the same booking, amount and currency, store the same
// text; and a source whose deliveries anyone can send could pile rows up on a text that
// another source's look-ups would then walk, one by one, under the key's lock.
func TestForensicKeys_LookupSeeksItsSourceAndRule(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	open(t, url)
	conn := postgrestest.Connect(t, url)
	for _, q := range []string{
		`INSERT INTO business_keys (source, hash, delivery, seen_at)
SELECT 'other', 'H', i, i FROM generate_series(1, 2000) AS i`,
		`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT 'other-rule', 'H', 'psp', i, i FROM generate_series(1, 2000) AS i`,
		`ANALYZE business_keys, correlation_keys`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, postgres.SQLIndexPlans); err != nil {
		t.Fatal(err)
	}
	removed := regexp.MustCompile(`Rows Removed by Filter: (\d+)`)
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"business key", postgres.SQLBusinessLookup, []any{[]string{"ota"}, []string{"evt_1"}, []string{"H"}, []int64{0}}},
		{"correlation key", postgres.SQLCorrelationLookup, []any{[]string{"double-refund"}, []string{"H"}, []int64{0}, []string{"ota"}}},
	} {
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range plan {
			if m := removed.FindStringSubmatch(l); m != nil && m[1] != "0" {
				t.Errorf("%s: the look-up walked %s rows of another %s:\n%s", c.name, m[1],
					map[string]string{"business key": "source", "correlation key": "rule"}[c.name], strings.Join(plan, "\n"))
				break
			}
		}
	}
}
