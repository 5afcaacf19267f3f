package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// aloneDelivery is a delivery of key as the receiver records it.
func aloneDelivery(key string) *storage.Delivery {
	return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
}

// aloneDay is the claim options of the deliveries of these tests.
var aloneDay = storage.ClaimOptions{TTL: 24 * time.Hour}

// aloneOpen opens a replica on the database at url, closed when the test ends.
func aloneOpen(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(t.Context(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// aloneBegin begins a transaction on conn, rolled back when the test ends if it is
// still open, and runs q in it.
func aloneBegin(t *testing.T, conn *pgx.Conn, q string, args ...any) pgx.Tx {
	t.Helper()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.WithoutCancel(t.Context())) })
	if _, err := tx.Exec(t.Context(), q, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// holdKeyLock holds the claim key lock of key, as db computes it, in a transaction of
// conn.
func holdKeyLock(t *testing.T, conn *pgx.Conn, db *DB, key string) pgx.Tx {
	t.Helper()
	return aloneBegin(t, conn, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`,
		int32(claimKeyLock&0xffffffff), db.locks.key(forensicKeyLockID("claim", "ota", key)))
}

// holdExpiredClaim stores an expired processed claim of key and holds its row in a
// transaction of conn: a delivery of key waits for it, to trace and take it over.
func holdExpiredClaim(t *testing.T, conn *pgx.Conn, key string) pgx.Tx {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
VALUES ('ota', $1, 'processed', 0, 'h', 0, 0, 0)`, key); err != nil {
		t.Fatal(err)
	}
	return aloneBegin(t, conn, `SELECT 1 FROM claims WHERE key = $1 FOR UPDATE`, key)
}

// waitForLockWait returns once a session of the database waits for a lock.
func waitForLockWait(t *testing.T, conn *pgx.Conn, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var waiting int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// TestRecord_AloneTakesNoKeyLocks: a writer with no other intake transaction in flight
// runs its transactions alone, under the intake-wide lock, and takes no lock of a key:
// a connection holding a key's lock does not hold up the recording of that key. Once
// another intake transaction is found in flight (another replica's, here a connection
// holding the intake-wide lock shared), the writer takes the keys' locks again, and
// waits for that key's holder.
func TestRecord_AloneTakesNoKeyLocks(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	ctx := t.Context()
	db, conn := aloneOpen(t, url), postgrestest.Connect(t, url)
	record := func(key string) <-chan error {
		errc := make(chan error, 1)
		go func() { errc <- db.Record(context.Background(), aloneDelivery(key), aloneDay) }()
		return errc
	}

	tx := holdKeyLock(t, conn, db, "k1")
	select {
	case err := <-record("k1"):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a lone writer waited for a key's lock")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// Another intake transaction in flight: the writer's next transaction finds it and
	// runs beside it, under the keys' locks.
	tx = aloneBegin(t, postgrestest.Connect(t, url), `SELECT pg_advisory_xact_lock_shared($1::bigint)`, db.locks.id(intakeLock))
	if err := <-record("k2"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx = holdKeyLock(t, conn, db, "k3")
	errc := record("k3")
	select {
	case err := <-errc:
		t.Fatalf("recorded (%v) while another transaction held its key's lock", err)
	case <-time.After(time.Second):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM claims WHERE key IN ('k1', 'k2', 'k3')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d claims stored, want 3", n)
	}
}

// TestRecord_AloneLetsOthersThrough: a replica's transaction that runs alone and meets
// a claim's row held by another transaction (an operator's, here) gives way after
// aloneLockWait and runs again under the keys' locks: another replica's intake, which
// waited for it, goes on while the row is still held, and the first delivery is stored
// once the row is let go.
func TestRecord_AloneLetsOthersThrough(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	ctx := t.Context()
	a, b, conn := aloneOpen(t, url), aloneOpen(t, url), postgrestest.Connect(t, url)
	tx := holdExpiredClaim(t, conn, "held")
	held := make(chan error, 1)
	go func() { held <- a.Record(context.Background(), aloneDelivery("held"), aloneDay) }()
	waitForLockWait(t, conn, "the delivery of the held claim never waited for its row")
	// b records while a's transaction waits for the row or runs again: whichever,
	// within the busy timeout, not once the row is let go.
	for i := range 5 {
		if err := b.Record(ctx, aloneDelivery(fmt.Sprint("other-", i)), aloneDay); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-held:
		t.Fatalf("recorded (%v) while its claim's row was held", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// TestRecord_AloneTriesAgainWhileBusy: a writer that found another intake transaction in
// flight tries to run alone again aloneRetry later, however many deliveries it records
// under the keys' locks meanwhile: once the other replica is gone, a replica that takes
// a delivery more often than aloneRetry runs alone again all the same.
func TestRecord_AloneTriesAgainWhileBusy(t *testing.T) {
	defer func(d time.Duration) { aloneRetry = d }(aloneRetry)
	aloneRetry = 500 * time.Millisecond
	url := postgrestest.NewDatabase(t)
	ctx := t.Context()
	db, conn := aloneOpen(t, url), postgrestest.Connect(t, url)

	// Another replica's intake transaction in flight: the next transaction finds it.
	tx := aloneBegin(t, conn, `SELECT pg_advisory_xact_lock_shared($1::bigint)`, db.locks.id(intakeLock))
	if err := db.Record(ctx, aloneDelivery("found"), aloneDay); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Gone: the writer records a delivery every 100 ms, for three times aloneRetry.
	for i, end := 0, time.Now().Add(3*aloneRetry); time.Now().Before(end); i++ {
		if err := db.Record(ctx, aloneDelivery(fmt.Sprint("busy-", i)), aloneDay); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// By now it runs alone: a key's lock held elsewhere does not hold it up.
	holdKeyLock(t, conn, db, "last")
	errc := make(chan error, 1)
	go func() { errc <- db.Record(context.Background(), aloneDelivery("last"), aloneDay) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer still takes the keys' locks, long after the other intake transaction ended")
	}
}

// TestRecord_AloneUnderLockTimeout: with a lock_timeout of the database's (or the
// role's) shorter than the time a replica's transaction runs alone, another replica's
// intake, which waits for that transaction to end, is not failed by it: it waits for
// another replica's intake, not for a lock an operator may hold for ever.
func TestRecord_AloneUnderLockTimeout(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	ctx := t.Context()
	conn := postgrestest.Connect(t, url)
	var name string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	a := aloneOpen(t, url)
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET lock_timeout = '20ms'`); err != nil {
		t.Fatal(err)
	}
	b := aloneOpen(t, url)
	// b's connections are opened under the database's lock_timeout.
	if err := b.Record(ctx, aloneDelivery("b-first"), aloneDay); err != nil {
		t.Fatal(err)
	}
	// a runs alone, and waits aloneLockWait for a row an operator holds.
	holdExpiredClaim(t, conn, "held")
	go a.Record(context.Background(), aloneDelivery("held"), aloneDay)
	waitForLockWait(t, conn, "the delivery of the held claim never waited for its row")
	if err := b.Record(ctx, aloneDelivery("b-second"), aloneDay); err != nil {
		t.Fatalf("another replica's transaction running alone failed this one's: %v", err)
	}
}
