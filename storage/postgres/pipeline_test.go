package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_PlansProbeIndexes: intake's statements that join an array of keys to a
// table run by plans that look each key up in an index, whether PostgreSQL planned
// them while the tables were empty (every fresh install) or full: never a scan of a
// whole table, nor a hash or merge join, which would read one whole for every batch
// as it fills. PostgreSQL caches each statement's generic plan and runs it from its
// sixth run on: what it cached is what is checked.
func TestRecord_PlansProbeIndexes(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	// One connection: the writers' statements are prepared on the one the check asks.
	db, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	// forensics runs intake's forensic checks, each kind in transactions of its own,
	// more often than PostgreSQL's five custom plans: a business key and a correlation
	// key stored, then met again under another key (flagged), through another source
	// (flagged), by a duplicate whose amount differs (a money mismatch), and by a
	// source that blocks them (a duplicate, its claim undone).
	forensics := func() {
		t.Helper()
		for i := range 8 {
			at := time.Now()
			delivery := func(source, key string, amount string) *storage.Delivery {
				d := testDelivery(fmt.Sprintf("%s_%d_%d", key, n, i))
				d.Source, d.ReceivedAt, d.BusinessKey, d.Amount = source, at, fmt.Sprintf("bk_%d_%d", n, i), amount
				d.PayloadHash = "h" + amount
				d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: fmt.Sprintf("c_%d_%d", n, i), Window: time.Hour}}
				return d
			}
			opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
			blocking := opt
			blocking.BusinessBlocks = true
			for _, c := range []struct {
				d    *storage.Delivery
				opt  storage.ClaimOptions
				want string
			}{
				{delivery("ota", "first", "80.00"), opt, "accepted [] false"},
				{delivery("ota", "again", "80.00"), opt, "accepted [business_key] false"},
				{delivery("psp", "paid", "80.00"), opt, "accepted [correlation] false"},
				{delivery("ota", "first", "90.00"), opt, "duplicate [] true"},
				{delivery("ota", "blocked", "80.00"), blocking, "duplicate [] false"},
			} {
				if err := db.Record(ctx, c.d, c.opt); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprintf("%s %v %v", c.d.Outcome, c.d.Suspects, c.d.MoneyMismatch); got != c.want {
					t.Fatalf("%s/%s: %s, want %s", c.d.Source, c.d.Key, got, c.want)
				}
			}
		}
	}
	// record runs intake: each key twice, one transaction each, so that the claim of
	// the second loses and every statement of a transaction runs, each more often
	// than PostgreSQL's five custom plans before it settles on a generic one.
	record := func() {
		t.Helper()
		for i := range 16 {
			d := testDelivery(fmt.Sprintf("key_%d", n+i/2))
			if err := db.Record(ctx, d, day); err != nil {
				t.Fatal(err)
			}
			if want := []storage.Outcome{storage.Accepted, storage.Duplicate}[i%2]; d.Outcome != want {
				t.Fatalf("delivery %d: %s, want %s", i, d.Outcome, want)
			}
		}
		n += 8
		forensics()
	}
	// A table is read by an index scan whose condition takes a value of the row it
	// joins (v.key, c.first_delivery, ..., or a function of one: hashtextextended(v.hash,
	// hashtext(v.source))), the line after it; a Seq Scan, a Bitmap Heap Scan, an index scan without such
	// a condition (a whole partial index), or a Materialize would read the table whole, and a Hash or Merge Join needs that (a
	// nested loop's Join Filter, a condition on the rows it joined, reads nothing).
	scan := regexp.MustCompile(`\b(\w+ )*Scan\b.* on (\w+)`)
	probe := regexp.MustCompile(`^\s*Index Cond: .*= (\w+\()?\(?[a-z]+\.\w+`)
	readsWhole := func(plan string) string {
		lines := strings.Split(plan, "\n")
		for i, l := range lines {
			switch {
			case strings.Contains(l, "Join") && !strings.Contains(l, "Nested Loop") && !strings.Contains(l, "Join Filter:"),
				strings.Contains(l, "Materialize"):
				return l
			case !scan.MatchString(l) || strings.Contains(l, "Function Scan") || strings.Contains(l, "CTE Scan") ||
				strings.Contains(l, "Subquery Scan"):
			case !strings.Contains(l, "Index Scan") && !strings.Contains(l, "Index Only Scan"),
				i+1 == len(lines), !probe.MatchString(lines[i+1]):
				return l
			}
		}
		return ""
	}
	check := func(when string) {
		t.Helper()
		plans, err := postgres.GenericPlanShapes(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(plans) < 8 {
			t.Fatalf("%s: %d joining statements prepared, want intake's (traces, holders, late duplicates, "+
				"business and correlation keys, money mismatches, suspects, claims undone): %v", when, len(plans), plans)
		}
		generic, err := postgres.GenericPlans(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for stmt, plan := range plans {
			t.Logf("%s:\n%s\n%s", when, stmt, plan)
			if generic[stmt] == 0 {
				t.Errorf("%s: never run by a generic plan:\n%s", when, stmt)
			}
			if l := readsWhole(plan); l != "" {
				t.Errorf("%s: a table read whole (%s):\n%s\n%s", when, strings.TrimSpace(l), stmt, plan)
			}
		}
	}
	record()
	check("tables empty")
	// Fill the tables that intake joins, and have PostgreSQL learn their size: its
	// statistics replace every cached plan of them.
	conn := postgrestest.Connect(t, url)
	for _, q := range []string{
		`INSERT INTO deliveries (source, received_at, outcome, status, key, payload_hash, body)
SELECT 'ota', i, 'accepted', 200, 'filled_' || i, 'h', '\x00' FROM generate_series(1, 20000) AS i`,
		`INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
SELECT 'ota', 'filled_' || i, 'processed', i, 'h', i, i, i FROM generate_series(1, 20000) AS i`,
		`INSERT INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at)
SELECT 'ota', sha256(i::text::bytea), i, i, i FROM generate_series(1, 20000) AS i`,
		`INSERT INTO business_keys (source, hash, delivery, seen_at)
SELECT 'ota', 'filled_' || i, i, i FROM generate_series(1, 20000) AS i`,
		`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT 'double-refund', 'filled_' || i, 'ota', i, i FROM generate_series(1, 20000) AS i`,
		`ANALYZE deliveries, claims, key_traces, business_keys, correlation_keys`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	record()
	check("tables filled")
}

// TestRecord_ReplicasCrossingKeysNeverDeadlock: two replicas' transactions that share
// keys take their locks in one order, so one waits for the other but PostgreSQL never
// has to break a deadlock (a second's wait, deadlock_timeout, then a retry). The keys
// cross as they can under load: replica 2's transaction holds a new key (k1) and waits
// at the next (k2, held by another connection), and meanwhile k3 becomes a processed
// claim, which replica 1's transaction, of k1 and k3, would lock for its trace of
// expired claims before claiming k1, while replica 2 goes on to k3 after k2.
func TestRecord_ReplicasCrossingKeysNeverDeadlock(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	var dbs [2]*postgres.DB
	for i := range dbs {
		db, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	conn := postgrestest.Connect(t, url)
	now := time.Now().UnixMilli()
	if _, err := conn.Exec(ctx, `INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
SELECT 'ota', k, 'processing', 0, 'h', $1::bigint, $1::bigint + 86400000, $1::bigint FROM unnest(ARRAY['k2', 'k3']) AS k`, now); err != nil {
		t.Fatal(err)
	}
	holder := postgrestest.Connect(t, url)
	hold, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, `SELECT 1 FROM claims WHERE key = 'k2' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() (bool, error) {
		return func() (bool, error) {
			var w int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&w)
			return w >= n, err
		}
	}
	record := func(db *postgres.DB, keys ...string) <-chan error {
		done := make(chan error, 1)
		var items []*storage.Delivery
		for _, k := range keys {
			items = append(items, testDelivery(k))
		}
		go func() { done <- db.RecordBatch(ctx, items, day) }()
		return done
	}
	second := record(dbs[1], "k1", "k2", "k3")
	waitFor(t, "replica 2 waiting at k2", waiting(1))
	if _, err := conn.Exec(ctx, `UPDATE claims SET state = 'processed' WHERE key = 'k3'`); err != nil {
		t.Fatal(err)
	}
	first := record(dbs[0], "k1", "k3")
	waitFor(t, "replica 1 waiting too", waiting(2))
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, done := range []<-chan error{second, first} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	holder.Close(ctx)
	conn.Close(ctx)
	if n := deadlocks(t, url, dbs[:]); n != 0 {
		t.Errorf("%d deadlocks, want none", n)
	}
}
