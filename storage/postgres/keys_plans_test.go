package postgres_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestKeys_StuckPlans checks that the pages of a stuck listing, the first and those
// after a cursor, read claims_unsettled from where the page starts, in the listing's
// order, with the statistics of a table of many settled claims and a few thousand
// unsettled ones (a hundred to a millisecond): no full read of the table, and no sort
// of the unsettled keys, whether PostgreSQL plans with the values or without.
func TestKeys_StuckPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	conn := postgrestest.Connect(t, url)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	const n, unsettled = 200_000, 5000
	_, err := conn.Exec(ctx, `
INSERT INTO claims (id, source, key, state, payload_hash, claimed_at, expires_at, updated_at)
SELECT i, CASE WHEN i % 5 = 0 THEN 'pms' ELSE 'ota' END, 'k' || i,
	CASE WHEN i <= $1 - $2 THEN 'processed' WHEN i % 3 = 0 THEN 'failed' ELSE 'processing' END,
	'h', $3::bigint + i, $3::bigint + i + 86400000, $3::bigint + i / 100
FROM generate_series(1, $1) AS i`, n, unsettled, start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE claims`); err != nil {
		t.Fatal(err)
	}
	stuckBefore := time.UnixMilli(start + n/100)
	after := storage.KeyCursor{UpdatedAt: time.UnixMilli(start + (n-unsettled/2)/100), ID: n - unsettled/2}
	// A source's stuck keys may come from claims_stuck instead, which holds them by
	// source: sorted, but only that source's keys from the cursor's millisecond on.
	for _, tc := range []struct {
		f      storage.KeyFilter
		bounds string
	}{
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 101}, ""},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 101, After: after}, "ROW(updated_at, id) > ROW("},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 1001, After: after, State: storage.StateFailed}, "ROW(updated_at, id) > ROW("},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 101, After: after, Source: "pms"}, "updated_at >= "},
	} {
		for _, generic := range []bool{false, true} {
			plan, err := db.ExplainKeys(ctx, tc.f)
			if generic {
				plan, err = db.ExplainKeysGeneric(ctx, tc.f)
			}
			if err != nil {
				t.Fatal(err)
			}
			index := `\bclaims_unsettled\b`
			if tc.f.Source != "" && strings.Contains(plan, "claims_stuck") {
				index = `\bclaims_stuck\b`
			}
			conds := regexp.MustCompile(`(?m)^\s*Index Cond: .*$`).FindAllString(plan, -1)
			bounded := tc.bounds == "" || len(conds) > 0
			for _, c := range conds {
				bounded = bounded && strings.Contains(c, tc.bounds)
			}
			if !regexp.MustCompile(index).MatchString(plan) || strings.Contains(plan, "Seq Scan") || !bounded ||
				strings.Contains(index, "unsettled") && strings.Contains(plan, "Sort") {
				t.Errorf("stuck keys %+v (generic plan %v) not read from the cursor on through their index:\n%s", tc.f, generic, plan)
			}
			t.Logf("%+v (generic plan %v)\n%s", tc.f, generic, plan)
		}
	}
}
