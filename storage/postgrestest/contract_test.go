package postgrestest_test

// The claim contract on PostgreSQL, pinned in SQL before the engine exists: the shapes
// of the statements that the PostgreSQL engine will use for the claim, the dispatcher's
// lease and the sweep's lock, each tested against a real server with concurrent
// sessions. The engine's own tests will take over from these; until then they say which
// statement gives which guarantee.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// contractSchema is the part of the claims table that the statements below need.
// generation is 1 when a key is first claimed and counts each takeover after that, so
// that a claim's RETURNING says by itself whether it inserted or took over, without
// reading the system column xmax.
const contractSchema = `
CREATE TABLE claims (
	source          text        NOT NULL,
	key             text        NOT NULL,
	delivery        bigint      NOT NULL,
	generation      integer     NOT NULL DEFAULT 1,
	state           text        NOT NULL DEFAULT 'processing',
	released        boolean     NOT NULL DEFAULT false,
	claimed_at      timestamptz NOT NULL,
	expires_at      timestamptz NOT NULL,
	next_attempt_at timestamptz NOT NULL,
	lease_owner     text,
	lease_until     timestamptz,
	PRIMARY KEY (source, key)
);
CREATE INDEX claims_due ON claims (next_attempt_at) WHERE state = 'processing';
CREATE TABLE sweeps (runs integer NOT NULL);
INSERT INTO sweeps VALUES (0);
`

// claimSQL claims (source, key) for a delivery: one statement, atomic under any
// concurrency. It inserts the claim when the key has none; when it has one that has
// expired ($4 is now: expires_at <= now) or was released, it takes it over; otherwise
// it changes nothing and returns no row: the delivery is a duplicate. A takeover
// racing another re-checks the WHERE on the row the other wrote (READ COMMITTED's
// ON CONFLICT locks the row and evaluates the condition on its newest version), so an
// expired claim is taken over once. A duplicate leaves the row locked until its
// transaction ends.
const claimSQL = `
INSERT INTO claims AS c (source, key, delivery, claimed_at, expires_at, next_attempt_at)
VALUES ($1, $2, $3, $4, $5, $4)
ON CONFLICT (source, key) DO UPDATE
SET delivery = EXCLUDED.delivery, generation = c.generation + 1, state = 'processing',
    released = false, claimed_at = EXCLUDED.claimed_at, expires_at = EXCLUDED.expires_at,
    next_attempt_at = EXCLUDED.next_attempt_at, lease_owner = NULL, lease_until = NULL
WHERE c.expires_at <= EXCLUDED.claimed_at OR c.released
RETURNING c.generation`

// leaseSQL hands the next due claim to one dispatcher ($1 names it, $2 is now, $3 the
// end of its lease) and returns it, or no row when nothing is due. SKIP LOCKED passes
// over a claim that another dispatcher is leasing at this moment instead of waiting for
// it; a claim leased a moment ago fails the re-checked WHERE (its lease runs), so each
// claim has one dispatcher at a time. A lease that ran out (the dispatcher died) makes
// the claim due again, under the same source and key, hence the same Idempotency-Key.
const leaseSQL = `
WITH next AS (
	SELECT source, key FROM claims
	WHERE state = 'processing' AND next_attempt_at <= $2
	  AND (lease_until IS NULL OR lease_until <= $2)
	ORDER BY next_attempt_at
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE claims AS c SET lease_owner = $1, lease_until = $3
FROM next WHERE c.source = next.source AND c.key = next.key
RETURNING c.source, c.key, c.generation`

// sweepLock is the advisory lock that a sweep holds, so that of several replicas one
// sweeps at a time. Session-level (pg_try_advisory_lock) it must be taken and released
// on one dedicated connection, never on a connection that goes back to a pool while
// held; the transaction-level form (pg_try_advisory_xact_lock) ends with the sweep's
// transaction by itself.
const sweepLock int64 = 0x686f6f6b_00000001

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// claim runs claimSQL; won is false for a duplicate.
func claim(ctx context.Context, q querier, source, key string, delivery int64, now time.Time, ttl time.Duration) (won bool, generation int, err error) {
	err = q.QueryRow(ctx, claimSQL, source, key, delivery, now, now.Add(ttl)).Scan(&generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("claim %s/%s: %w", source, key, err)
	}
	return true, generation, nil
}

// lease runs leaseSQL; ok is false when nothing is due.
func lease(ctx context.Context, q querier, owner string, now time.Time, d time.Duration) (key string, generation int, ok bool, err error) {
	var source string
	err = q.QueryRow(ctx, leaseSQL, owner, now, now.Add(d)).Scan(&source, &key, &generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("lease for %s: %w", owner, err)
	}
	return key, generation, true, nil
}

// onConns runs f(i, conn) on n sessions at once: all n connections are acquired from
// pool before any f starts, so the calls run on distinct server backends, released
// together. It returns when every f has, within the test's bounded context.
func onConns(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int, f func(i int, conn *pgxpool.Conn) error) {
	t.Helper()
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("acquire connection %d of %d: %v", i+1, n, err)
		}
		defer c.Release()
		conns[i] = c
	}
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			<-start
			errs <- f(i, c)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// testContext bounds a test's waits on the server.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// t0 is a fixed clock for the claims: timestamptz keeps microseconds.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const sessions = 8

// TestClaim_OneWinner: of the deliveries of one key sent on several sessions at once,
// exactly one wins the claim, for every key.
func TestClaim_OneWinner(t *testing.T) {
	pool := mustPool(t, sessions)
	ctx := testContext(t)
	const keys = 50

	var mu sync.Mutex
	winners := map[string][]int64{}
	onConns(t, ctx, pool, sessions, func(i int, conn *pgxpool.Conn) error {
		// Each session goes through the keys in an order of its own, so that sessions
		// meet on different keys at different moments.
		for _, k := range rand.New(rand.NewPCG(uint64(i), 1)).Perm(keys) {
			key := fmt.Sprintf("evt_%03d", k)
			delivery := int64(i*1000 + k)
			won, gen, err := claim(ctx, conn, "ota", key, delivery, t0, time.Hour)
			if err != nil {
				return err
			}
			if won {
				if gen != 1 {
					return fmt.Errorf("%s: first claim has generation %d, want 1", key, gen)
				}
				mu.Lock()
				winners[key] = append(winners[key], delivery)
				mu.Unlock()
			}
		}
		return nil
	})

	for k := range keys {
		key := fmt.Sprintf("evt_%03d", k)
		if len(winners[key]) != 1 {
			t.Errorf("%s won by %d deliveries %v, want exactly 1", key, len(winners[key]), winners[key])
			continue
		}
		var delivery int64
		if err := pool.QueryRow(ctx, "SELECT delivery FROM claims WHERE source = 'ota' AND key = $1", key).Scan(&delivery); err != nil {
			t.Fatal(err)
		}
		if delivery != winners[key][0] {
			t.Errorf("%s: claim holds delivery %d, the winner was %d", key, delivery, winners[key][0])
		}
	}
}

// TestClaim_Expired: a claim expires at expires_at exactly; then one of several
// concurrent deliveries takes it over, once; a released claim is taken over before
// it expires.
func TestClaim_Expired(t *testing.T) {
	pool := mustPool(t, sessions)
	ctx := testContext(t)

	t.Run("NotBefore", func(t *testing.T) {
		mustClaim(t, ctx, pool, "early", 1, t0)
		won, _, err := claim(ctx, pool, "ota", "early", 2, t0.Add(time.Hour-time.Microsecond), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if won {
			t.Fatal("a claim a microsecond before it expires was taken over")
		}
	})

	t.Run("TakenOverOnce", func(t *testing.T) {
		const keys = 20
		for k := range keys {
			mustClaim(t, ctx, pool, fmt.Sprintf("exp_%02d", k), 1, t0)
		}
		var mu sync.Mutex
		takeovers := map[string][]int64{}
		onConns(t, ctx, pool, sessions, func(i int, conn *pgxpool.Conn) error {
			for _, k := range rand.New(rand.NewPCG(uint64(i), 2)).Perm(keys) {
				key := fmt.Sprintf("exp_%02d", k)
				delivery := int64(100 + i)
				// At the second it expires: expired.
				won, gen, err := claim(ctx, conn, "ota", key, delivery, t0.Add(time.Hour), time.Hour)
				if err != nil {
					return err
				}
				if won {
					if gen != 2 {
						return fmt.Errorf("%s: takeover has generation %d, want 2", key, gen)
					}
					mu.Lock()
					takeovers[key] = append(takeovers[key], delivery)
					mu.Unlock()
				}
			}
			return nil
		})
		for k := range keys {
			key := fmt.Sprintf("exp_%02d", k)
			if len(takeovers[key]) != 1 {
				t.Errorf("%s taken over by %d deliveries %v, want exactly 1", key, len(takeovers[key]), takeovers[key])
			}
		}
	})

	t.Run("Released", func(t *testing.T) {
		mustClaim(t, ctx, pool, "rel", 1, t0)
		if _, err := pool.Exec(ctx, "UPDATE claims SET released = true WHERE source = 'ota' AND key = 'rel'"); err != nil {
			t.Fatal(err)
		}
		won, gen, err := claim(ctx, pool, "ota", "rel", 2, t0.Add(time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !won || gen != 2 {
			t.Fatalf("claim of a released key: won %v, generation %d; want a takeover, generation 2", won, gen)
		}
		// Taken over, the key is held again.
		if won, _, err := claim(ctx, pool, "ota", "rel", 3, t0.Add(2*time.Minute), time.Hour); err != nil || won {
			t.Fatalf("claim after the takeover: won %v, %v; want a duplicate", won, err)
		}
	})
}

func mustClaim(t *testing.T, ctx context.Context, q querier, key string, delivery int64, now time.Time) {
	t.Helper()
	won, gen, err := claim(ctx, q, "ota", key, delivery, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !won || gen != 1 {
		t.Fatalf("first claim of %s: won %v, generation %d", key, won, gen)
	}
}

// TestLease: the dispatcher's lease hands each due claim to one of several concurrent
// dispatchers, passes over a claim being leased rather than waiting for it, and hands a
// claim whose lease ran out to another dispatcher under the same key.
func TestLease(t *testing.T) {
	pool := mustPool(t, sessions)
	ctx := testContext(t)
	clear := func(t *testing.T) {
		t.Helper()
		if _, err := pool.Exec(ctx, "DELETE FROM claims"); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("OneOfSeveral", func(t *testing.T) {
		clear(t)
		mustClaim(t, ctx, pool, "one", 1, t0)
		var mu sync.Mutex
		var got []string
		onConns(t, ctx, pool, sessions, func(i int, conn *pgxpool.Conn) error {
			owner := fmt.Sprintf("replica-%d", i)
			key, _, ok, err := lease(ctx, conn, owner, t0, 30*time.Second)
			if err != nil || !ok {
				return err
			}
			mu.Lock()
			got = append(got, owner+":"+key)
			mu.Unlock()
			return nil
		})
		if len(got) != 1 {
			t.Fatalf("the one due claim was leased %d times (%v), want once", len(got), got)
		}
	})

	t.Run("EachClaimOnce", func(t *testing.T) {
		clear(t)
		const keys = 40
		for k := range keys {
			mustClaim(t, ctx, pool, fmt.Sprintf("due_%02d", k), int64(k), t0.Add(time.Duration(k)*time.Millisecond))
		}
		var mu sync.Mutex
		leased := map[string][]string{}
		onConns(t, ctx, pool, sessions, func(i int, conn *pgxpool.Conn) error {
			owner := fmt.Sprintf("replica-%d", i)
			for range keys + 1 { // bounded: no dispatcher can lease more than all of them
				key, _, ok, err := lease(ctx, conn, owner, t0.Add(time.Second), 30*time.Second)
				if err != nil || !ok {
					return err
				}
				mu.Lock()
				leased[key] = append(leased[key], owner)
				mu.Unlock()
			}
			return fmt.Errorf("%s leased more claims than there are", owner)
		})
		if len(leased) != keys {
			t.Errorf("%d claims leased, want all %d", len(leased), keys)
		}
		for key, owners := range leased {
			if len(owners) != 1 {
				t.Errorf("%s leased by %v, want one dispatcher", key, owners)
			}
		}
	})

	t.Run("SkipsLocked", func(t *testing.T) {
		clear(t)
		mustClaim(t, ctx, pool, "first", 1, t0)
		mustClaim(t, ctx, pool, "second", 2, t0.Add(time.Second))
		// A's lease of the first claim is under way: its transaction holds the row.
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		key, _, ok, err := lease(ctx, tx, "replica-a", t0.Add(time.Minute), 30*time.Second)
		if err != nil || !ok || key != "first" {
			t.Fatalf("A's lease: %q, %v, %v; want the first claim", key, ok, err)
		}
		// B does not wait for A: it gets the next claim. A wait would last until the
		// bounded context ends and fail the lease.
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		key, _, ok, err = lease(bctx, pool, "replica-b", t0.Add(time.Minute), 30*time.Second)
		if err != nil || !ok || key != "second" {
			t.Fatalf("B's lease while A leases the first claim: %q, %v, %v; want the second claim", key, ok, err)
		}
		// A's lease rolled back (A died before committing): the first claim is due again.
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		key, _, ok, err = lease(ctx, pool, "replica-b", t0.Add(time.Minute), 30*time.Second)
		if err != nil || !ok || key != "first" {
			t.Fatalf("B's lease after A's rolled back: %q, %v, %v; want the first claim", key, ok, err)
		}
	})

	t.Run("ExpiredLeaseTakenOver", func(t *testing.T) {
		clear(t)
		mustClaim(t, ctx, pool, "hand-off", 1, t0)
		now := t0.Add(time.Minute)
		key, gen, ok, err := lease(ctx, pool, "replica-a", now, 30*time.Second)
		if err != nil || !ok {
			t.Fatalf("A's lease: %v, %v", ok, err)
		}
		// While A's lease runs, nobody else gets the claim.
		if k, _, ok, err := lease(ctx, pool, "replica-b", now.Add(30*time.Second-time.Microsecond), 30*time.Second); err != nil || ok {
			t.Fatalf("B's lease while A's runs: %q, %v, %v; want nothing", k, ok, err)
		}
		// A died; its lease ran out: B gets the same claim, the same key and generation,
		// so the downstream sees the same Idempotency-Key.
		k, g, ok, err := lease(ctx, pool, "replica-b", now.Add(30*time.Second), 30*time.Second)
		if err != nil || !ok || k != key || g != gen {
			t.Fatalf("B's lease after A's ran out: %q gen %d, %v, %v; want %q gen %d", k, g, ok, err, key, gen)
		}
		var owner string
		if err := pool.QueryRow(ctx, "SELECT lease_owner FROM claims WHERE key = $1", key).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if owner != "replica-b" {
			t.Fatalf("lease owner %q, want replica-b", owner)
		}
	})
}

// TestAdvisoryLock: of two sessions that try to sweep at once, one sweeps; the lock
// passes on when its holder unlocks, or dies, or (transaction-level) commits.
func TestAdvisoryLock(t *testing.T) {
	pool := mustPool(t, 4)
	ctx := testContext(t)

	t.Run("OneSweeper", func(t *testing.T) {
		var tried sync.WaitGroup
		tried.Add(2)
		var mu sync.Mutex
		var swept []int
		onConns(t, ctx, pool, 2, func(i int, conn *pgxpool.Conn) error {
			var locked bool
			err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", sweepLock).Scan(&locked)
			tried.Done()
			if err != nil || !locked {
				return err
			}
			if _, err := conn.Exec(ctx, "UPDATE sweeps SET runs = runs + 1"); err != nil {
				return err
			}
			mu.Lock()
			swept = append(swept, i)
			mu.Unlock()
			// Hold the lock until the other session has tried.
			tried.Wait()
			var unlocked bool
			if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", sweepLock).Scan(&unlocked); err != nil || !unlocked {
				return fmt.Errorf("unlock: %v, %v", unlocked, err)
			}
			return nil
		})
		var runs int
		if err := pool.QueryRow(ctx, "SELECT runs FROM sweeps").Scan(&runs); err != nil {
			t.Fatal(err)
		}
		if len(swept) != 1 || runs != 1 {
			t.Fatalf("sessions %v swept, %d runs; want one session, one run", swept, runs)
		}
		// Unlocked, the lock is free for the next sweep.
		var locked bool
		if err := pool.QueryRow(ctx, "SELECT pg_try_advisory_lock($1) AND pg_advisory_unlock($1)", sweepLock).Scan(&locked); err != nil || !locked {
			t.Fatalf("lock after the sweep: %v, %v; want it free", locked, err)
		}
	})

	t.Run("FreedWhenHolderDies", func(t *testing.T) {
		holder, err := pgx.Connect(ctx, pool.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		var locked bool
		if err := holder.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", sweepLock).Scan(&locked); err != nil || !locked {
			t.Fatalf("holder's lock: %v, %v", locked, err)
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", sweepLock).Scan(&locked); err != nil || locked {
			t.Fatalf("lock while held: %v, %v; want refused", locked, err)
		}
		// The holder's connection goes away without unlocking, as a killed replica's
		// does. Its backend ends a moment later: poll, bounded.
		holder.PgConn().Conn().Close()
		for attempt := 0; !locked; attempt++ {
			if attempt == 200 {
				t.Fatal("the lock of a session that died was never freed")
			}
			if attempt > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", sweepLock).Scan(&locked); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", sweepLock); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TransactionLevel", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var locked bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", sweepLock).Scan(&locked); err != nil || !locked {
			t.Fatalf("sweep's lock: %v, %v", locked, err)
		}
		other := func() bool {
			t.Helper()
			var locked bool
			if err := pool.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", sweepLock).Scan(&locked); err != nil {
				t.Fatal(err)
			}
			return locked
		}
		if other() {
			t.Fatal("another session took the lock during the sweep's transaction")
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if !other() {
			t.Fatal("the lock outlived the sweep's transaction")
		}
	})
}

// TestClaim_BatchOrder: a claim, won or duplicate, holds its row locked until its
// transaction ends, so two transactions that claim the same keys in opposite orders
// deadlock (PostgreSQL aborts one after deadlock_timeout); in one order, (source, key)
// ascending, one waits for the other and both commit. A group commit that claims
// several keys in one transaction must therefore claim them sorted, and retry a batch
// aborted with 40P01 all the same.
func TestClaim_BatchOrder(t *testing.T) {
	pool := mustPool(t, 4)
	ctx := testContext(t)

	// begin starts a transaction and returns it with its backend's pid.
	begin := func(t *testing.T) (pgx.Tx, int32) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.Background()) })
		var pid int32
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	// claimAsync claims key on tx in the background, once pid is seen waiting for a lock.
	claimAsync := func(t *testing.T, tx pgx.Tx, pid int32, key string) <-chan error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, _, err := claim(ctx, tx, "ota", key, 2, t0, time.Hour)
			done <- err
		}()
		for attempt := 0; ; attempt++ {
			if attempt == 200 {
				t.Fatalf("backend %d never waited for a lock", pid)
			}
			var waiting bool
			if err := pool.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting {
				return done
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("OppositeOrdersDeadlock", func(t *testing.T) {
		tx1, pid1 := begin(t)
		tx2, _ := begin(t)
		mustClaim(t, ctx, tx1, "dl-a", 1, t0)
		mustClaim(t, ctx, tx2, "dl-b", 1, t0)
		first := claimAsync(t, tx1, pid1, "dl-b") // tx1 waits for tx2
		_, _, err2 := claim(ctx, tx2, "ota", "dl-a", 2, t0, time.Hour)
		err1 := <-first
		var aborted int
		for _, err := range []error{err1, err2} {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
				aborted++
			} else if err != nil {
				t.Errorf("claim: %v, want a deadlock or nothing", err)
			}
		}
		if aborted != 1 {
			t.Fatalf("%d of the two transactions aborted as deadlocked (%v; %v), want 1", aborted, err1, err2)
		}
	})

	t.Run("SortedOrderWaits", func(t *testing.T) {
		tx1, _ := begin(t)
		tx2, pid2 := begin(t)
		mustClaim(t, ctx, tx1, "ok-a", 1, t0)
		second := claimAsync(t, tx2, pid2, "ok-a") // tx2 waits for tx1
		mustClaim(t, ctx, tx1, "ok-b", 1, t0)
		if err := tx1.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if won, _, err := claim(ctx, tx2, "ota", "ok-b", 2, t0, time.Hour); err != nil || won {
			t.Fatalf("second batch's claim of ok-b: won %v, %v; want a duplicate", won, err)
		}
		if err := tx2.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
