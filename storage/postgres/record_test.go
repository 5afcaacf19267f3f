package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// testDelivery is a delivery of key as the receiver records it.
func testDelivery(key string) *storage.Delivery {
	return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
}

var day = storage.ClaimOptions{TTL: 24 * time.Hour}

// waitFor polls cond until it holds, failing the test if it does not within a minute.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockIntake holds db's writer inside a transaction: a connection of the test's own
// claims the key "blocker" without committing, and a delivery of that key is recorded,
// whose claim then waits for that row. It returns once the writer waits, with a
// function that lets it go on (the test's claim rolled back, so the delivery wins) and
// the channel where the blocked Record's error arrives.
func blockIntake(t *testing.T, db *postgres.DB, url string) (release func(), blocked <-chan error) {
	t.Helper()
	holder := postgrestest.Connect(t, url)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(t.Context(), `INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
VALUES ('ota', 'blocker', 'processed', 0, 'h', 0, 0, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- db.Record(context.Background(), testDelivery("blocker"), day) }()
	watch := postgrestest.Connect(t, url)
	waitFor(t, "the writer to wait for the blocker's row", func() (bool, error) {
		var n int
		err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0, err
	})
	return func() {
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
	}, errc
}

// TestRecord_Replicas: two replicas on one database record the same keys at once, in
// different orders, one by one and in batches: each key is accepted exactly once, and
// every other delivery of it is a duplicate of that one.
func TestRecord_Replicas(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	replicas := []*postgres.DB{openEngine(t, url), openEngine(t, url)}
	const keys, senders = 30, 12
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("evt_%02d", i)
	}
	var mu sync.Mutex
	got := map[string][]*storage.Delivery{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range senders {
		wg.Go(func() {
			db := replicas[g%2]
			order := slices.Clone(names)
			if g%4 >= 2 {
				slices.Reverse(order)
			}
			<-start
			for i := 0; i < len(order); i += 5 {
				ds := make([]*storage.Delivery, 5)
				for j := range ds {
					ds[j] = testDelivery(order[i+j])
				}
				if g%3 == 0 {
					// A batch's keys in another order than its neighbours', and one of
					// them twice.
					slices.Reverse(ds)
					ds = append(ds, testDelivery(ds[0].Key))
					if err := db.RecordBatch(ctx, ds, day); err != nil {
						t.Error(err)
						return
					}
				} else {
					for _, d := range ds {
						if err := db.Record(ctx, d, day); err != nil {
							t.Error(err)
							return
						}
					}
				}
				mu.Lock()
				for _, d := range ds {
					got[d.Key] = append(got[d.Key], d)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, key := range names {
		var accepted []int64
		for _, d := range got[key] {
			if d.Outcome == storage.Accepted {
				accepted = append(accepted, d.ID)
			}
		}
		if len(accepted) != 1 {
			t.Errorf("%s: accepted as deliveries %v, want exactly one", key, accepted)
			continue
		}
		for _, d := range got[key] {
			if d.Outcome == storage.Duplicate && d.FirstDelivery != accepted[0] {
				t.Errorf("%s: delivery %d is a duplicate of %d, want of %d", key, d.ID, d.FirstDelivery, accepted[0])
			}
		}
		c, err := replicas[0].Claim(ctx, "ota", key)
		if err != nil || c.FirstDelivery != accepted[0] {
			t.Errorf("%s: claim %+v, %v; want held by delivery %d", key, c, err, accepted[0])
		}
		stored, err := replicas[1].KeyDeliveries(ctx, "ota", key)
		if err != nil || len(stored) != len(got[key]) {
			t.Errorf("%s: %d deliveries stored, %v; want %d", key, len(stored), err, len(got[key]))
		}
		for _, d := range stored {
			if (d.Outcome == storage.Accepted) != (d.ID == accepted[0]) || string(d.Body) != `{"id":"`+key+`"}` {
				t.Errorf("%s: stored delivery %d: %s, body %q", key, d.ID, d.Outcome, d.Body)
			}
		}
	}
}

// TestRecord_AbandonedIsNotWritten: a caller that stops waiting before a writer takes
// its delivery gets an error, and the delivery is never written, not even once the
// writer gets to it.
func TestRecord_AbandonedIsNotWritten(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	release, blocked := blockIntake(t, db, url)

	gaveUp, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := db.Record(gaveUp, testDelivery("abandoned"), day); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("record while the writer is held: %v, want the caller's deadline", err)
	}
	release()
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked delivery: %v", err)
	}
	// The writer takes the queue in order: once a later delivery is stored, it has
	// looked at the abandoned one.
	if err := db.Record(ctx, testDelivery("later"), day); err != nil {
		t.Fatal(err)
	}
	if c, err := db.Claim(ctx, "ota", "abandoned"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the abandoned delivery's key: %+v, %v; want no claim", c, err)
	}
	if ds, err := db.KeyDeliveries(ctx, "ota", "abandoned"); err != nil || len(ds) != 0 {
		t.Errorf("the abandoned delivery: %d stored, %v; want none", len(ds), err)
	}
}

// TestRecord_OwnErrorFailsOnlyItself: a request that the database refuses, in one
// transaction with others, fails alone, and its claim with it; the others are stored,
// and the connection that carried the refused transaction serves the next one. The key
// is refused by the claim, in the first round trip; the booking by the deliveries'
// index, in the round trip that also carries the commit, which must not go through.
func TestRecord_OwnErrorFailsOnlyItself(t *testing.T) {
	for name, spoil := range map[string]func(d *storage.Delivery, long string){
		"a key too long for the claims' index":         func(d *storage.Delivery, long string) { d.Key = long },
		"a booking too long for the deliveries' index": func(d *storage.Delivery, long string) { d.Booking = long },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			url := postgrestest.NewDatabase(t)
			db := openEngine(t, url)
			release, blocked := blockIntake(t, db, url)

			noise := make([]byte, 6000)
			rand.Read(noise)
			long := base64.StdEncoding.EncodeToString(noise) // random: PostgreSQL cannot compress it under the limit
			keys := []string{"good_1", "bad", "good_2", "good_3"}
			errs := make([]error, len(keys))
			ds := make([]*storage.Delivery, len(keys))
			var wg sync.WaitGroup
			for i, key := range keys {
				ds[i] = testDelivery(key)
				if key == "bad" {
					spoil(ds[i], long)
				}
				wg.Go(func() { errs[i] = db.Record(ctx, ds[i], day) })
			}
			// All queued behind the held writer, they go into its next transaction together.
			waitFor(t, "the deliveries to queue", func() (bool, error) { return postgres.QueuedRecords(db) == len(keys), nil })
			release()
			wg.Wait()
			if err := <-blocked; err != nil {
				t.Fatalf("the blocked delivery: %v", err)
			}
			for i, key := range keys {
				if key == "bad" {
					if errs[i] == nil || !strings.Contains(errs[i].Error(), "index row") {
						t.Errorf("the refused delivery: %v, want the index's refusal", errs[i])
					}
					if _, err := db.Claim(ctx, "ota", ds[i].Key); !errors.Is(err, storage.ErrNotFound) {
						t.Errorf("the refused delivery's key is claimed: %v", err)
					}
					if got, err := db.KeyDeliveries(ctx, "ota", ds[i].Key); err != nil || len(got) != 0 {
						t.Errorf("the refused delivery: %d stored, %v; want none", len(got), err)
					}
					continue
				}
				if errs[i] != nil || ds[i].Outcome != storage.Accepted {
					t.Errorf("%s: %v, %s; want accepted", key, errs[i], ds[i].Outcome)
					continue
				}
				if got, err := db.Delivery(ctx, ds[i].ID); err != nil || got.Key != key {
					t.Errorf("%s: stored %+v, %v", key, got, err)
				}
			}
			d := testDelivery("after")
			if err := db.Record(context.Background(), d, day); err != nil || d.Outcome != storage.Accepted {
				t.Errorf("a delivery after the refusal: %v, %s", err, d.Outcome)
			}
		})
	}
}

// TestRecord_ConnectionLost: a server that ends intake's connection in the middle of a
// transaction (a restart, a failover, an administrator) has stored none of it. Lost
// before the commit ran, as the server's answer to a statement before it says, the
// transaction is run again on a new connection and the delivery is stored, once: in
// the insert of its claim, and in the insert of its delivery, which the commit follows
// in the same round trip. Lost at the commit itself, it may have been stored, so the
// delivery fails (the provider sends it again) rather than being stored twice.
func TestRecord_ConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		table  string // whose first insert ends the connection
		timing string // when the trigger that ends it runs
		stored bool
	}{
		{"in the insert into claims", "claims", "BEFORE INSERT", true},         // the second round trip
		{"in the insert into deliveries", "deliveries", "BEFORE INSERT", true}, // the last, before the commit
		{"at the commit", "deliveries", "AFTER INSERT", false},                 // a deferred trigger: the commit runs it
	} {
		t.Run("ended "+tc.name, func(t *testing.T) {
			ctx := t.Context()
			url := postgrestest.NewDatabase(t)
			db := openEngine(t, url)
			if err := db.Record(ctx, testDelivery("before"), day); err != nil {
				t.Fatal(err)
			}
			// The server ends the connection of the first insert only: a sequence is
			// not rolled back with the transaction it ends.
			admin := postgrestest.Connect(t, url)
			trigger := `CREATE TRIGGER lose_once ` + tc.timing + ` ON ` + tc.table
			if tc.timing == "AFTER INSERT" {
				trigger = `CREATE CONSTRAINT TRIGGER lose_once AFTER INSERT ON ` + tc.table + ` DEFERRABLE INITIALLY DEFERRED`
			}
			if _, err := admin.Exec(ctx, `CREATE SEQUENCE lose_once;
CREATE FUNCTION lose_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('lose_once') = 1 THEN
		PERFORM pg_terminate_backend(pg_backend_pid());
	END IF;
	RETURN NEW;
END $$;
`+trigger+` FOR EACH ROW EXECUTE FUNCTION lose_once()`); err != nil {
				t.Fatal(err)
			}
			d := testDelivery("evt_1")
			err := db.Record(ctx, d, day)
			var lost int64
			if err := admin.QueryRow(ctx, `SELECT last_value FROM lose_once`).Scan(&lost); err != nil || lost < 1 {
				t.Fatalf("the trigger never ran: %d, %v", lost, err)
			}
			got, kerr := db.KeyDeliveries(ctx, "ota", "evt_1")
			if kerr != nil {
				t.Fatal(kerr)
			}
			if tc.stored {
				if err != nil || d.Outcome != storage.Accepted || len(got) != 1 {
					t.Errorf("connection lost before the commit: %v, %s, %d stored; want accepted, stored once",
						err, d.Outcome, len(got))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "terminating connection") {
				t.Errorf("connection lost with the commit: %v, want the loss", err)
			}
			if len(got) != 0 {
				t.Errorf("connection lost with the commit: %d stored, want none", len(got))
			}
			// The next delivery of the key is the provider's retry: stored, accepted.
			d = testDelivery("evt_1")
			if err := db.Record(ctx, d, day); err != nil || d.Outcome != storage.Accepted {
				t.Errorf("the retry: %v, %s; want accepted", err, d.Outcome)
			}
		})
	}
}

// TestRecord_ManyForensicKeys: replicas each recording a request of a thousand items,
// each with a business key and correlation keys, take no lock per key:
// one lock each would be more than the server's lock table holds as PostgreSQL ships
// (max_locks_per_transaction × max_connections, and what shared memory it has spare),
// and the requests would fail however often the providers sent them. Each runs alone
// instead, under the intake-wide lock, and is stored and checked like any other.
func TestRecord_ManyForensicKeys(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	const replicas, n = 4, 1000
	var wg sync.WaitGroup
	batches := make([][]*storage.Delivery, replicas)
	errs := make([]error, replicas)
	for r := range replicas {
		db := openEngine(t, url)
		for i := range n {
			d := testDelivery(fmt.Sprintf("evt_%d_%d", r, i))
			d.BusinessKey = fmt.Sprintf("bk-%d-%d", r, i%(n/2)) // the second half doubles the first
			for _, rule := range []string{"a", "b", "c", "d", "e"} {
				d.Correlations = append(d.Correlations, storage.CorrelationKey{Rule: rule, Hash: fmt.Sprintf("%s-%d-%d", rule, r, i), Window: time.Hour})
			}
			batches[r] = append(batches[r], d)
		}
		wg.Go(func() {
			errs[r] = db.RecordBatch(t.Context(), batches[r], storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", r, err)
			continue
		}
		for i, d := range batches[r] {
			want := 0
			if i >= n/2 {
				want = 1
			}
			if d.Outcome != storage.Accepted || len(d.Suspects) != want {
				t.Fatalf("replica %d, item %d: %s with %d suspects, want accepted with %d", r, i, d.Outcome, len(d.Suspects), want)
			}
		}
	}
}

// TestRecord_TextPostgreSQLCannotHold: a NUL byte or bytes that are not UTF-8, which
// PostgreSQL text refuses, never make a delivery fail: a header keeps them (JSON
// escapes them), the body keeps them (bytea), a field that only describes the delivery
// is stored with them escaped; a key is refused cleanly, before anything is written.
func TestRecord_TextPostgreSQLCannotHold(t *testing.T) {
	ctx := t.Context()
	db := openEngine(t, postgrestest.NewDatabase(t))

	d := testDelivery("evt_1")
	d.Property, d.Booking, d.ContentType = "PROP\x00417", "BK\xff1", "application/json; charset=\xfe"
	d.Headers = map[string][]string{"X-Note": {"a\x00b", "c\xffd"}}
	d.Body = []byte("{\"id\":\"evt_1\",\"note\":\"\x00\"}")
	if err := db.Record(ctx, d, day); err != nil {
		t.Fatalf("record: %v", err)
	}
	got, err := db.Delivery(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Property != `PROP\x00417` || got.Booking != `BK\xff1` || got.ContentType != `application/json; charset=\xfe` {
		t.Errorf("stored fields %q, %q, %q; want them escaped", got.Property, got.Booking, got.ContentType)
	}
	if v := got.Headers["X-Note"]; len(v) != 2 || v[0] != "a\x00b" || v[1] != "c\ufffdd" {
		t.Errorf("stored header %q, want the NUL kept and the stray byte replaced", v)
	}
	if string(got.Body) != string(d.Body) {
		t.Errorf("stored body %q, want %q", got.Body, d.Body)
	}
	if d.Property != "PROP\x00417" {
		t.Errorf("the caller's delivery was changed: property %q", d.Property)
	}

	rejected := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Key: "k\x00",
		Error: "signature \x00 does not match"}
	if err := db.Record(ctx, rejected, day); err != nil {
		t.Fatalf("record a rejection: %v", err)
	}
	if got, err := db.Delivery(ctx, rejected.ID); err != nil || got.Key != `k\x00` || got.Error != `signature \x00 does not match` {
		t.Errorf("stored rejection %+v, %v; want its key and error escaped", got, err)
	}

	for _, key := range []string{"evt\x00nul", "evt\xffbad"} {
		err := db.Record(ctx, testDelivery(key), day)
		if err == nil || !strings.Contains(err.Error(), "PostgreSQL cannot store") {
			t.Errorf("key %q: %v, want a refusal that says why", key, err)
		}
	}
	var claims, deliveries int
	err = rawConn(t, db).QueryRow(ctx, `SELECT (SELECT count(*) FROM claims), (SELECT count(*) FROM deliveries)`).Scan(&claims, &deliveries)
	if err != nil || claims != 1 || deliveries != 2 {
		t.Errorf("%d claims and %d deliveries stored (%v); want 1 and 2: nothing of the refused keys", claims, deliveries, err)
	}
}

// TestSweep_AnotherReplicaSweeps: while another replica holds a sweep's lock, the
// sweep deletes nothing and says so without an error; once it is free, it sweeps.
func TestSweep_AnotherReplicaSweeps(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	long := time.Now().Add(-48 * time.Hour)
	for i := range 3 {
		d := testDelivery(fmt.Sprintf("evt_%d", i))
		d.ReceivedAt = long
		if err := db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	other := postgrestest.Connect(t, url)
	hold := func(lock int64) func() {
		if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
			t.Fatal(err)
		}
		return func() {
			if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := time.Now()

	unlock := hold(postgres.LockID(db, postgres.SweepExpiredLock))
	if n, err := db.SweepExpired(ctx, now, 100); n != 0 || err != nil {
		t.Errorf("claims sweep while another replica sweeps: %d, %v; want 0, nil", n, err)
	}
	unlock()
	if n, err := db.SweepExpired(ctx, now, 100); n != 3 || err != nil {
		t.Errorf("claims sweep: %d, %v; want 3", n, err)
	}

	enginetest.CatchUpRollups(t, db)
	unlock = hold(postgres.LockID(db, postgres.SweepDeliveriesLock))
	n, next, err := db.SweepDeliveries(ctx, now, now.Add(-time.Hour), storage.SweepCursor{}, 100)
	if n != 0 || err != nil || !next.Done() {
		t.Errorf("retention sweep while another replica sweeps: %d, %+v, %v; want 0 and a walk done", n, next, err)
	}
	unlock()
	n, next, err = db.SweepDeliveries(ctx, now, now.Add(-time.Hour), storage.SweepCursor{}, 100)
	if n != 3 || err != nil || !next.Done() {
		t.Errorf("retention sweep: %d, %+v, %v; want 3 and done", n, next, err)
	}
	var traces int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM key_traces`).Scan(&traces); err != nil || traces != 3 {
		t.Errorf("traces of the swept claims: %d, %v; want 3", traces, err)
	}
}

// TestRecordBatch_HeldClaimExpiresWithin: items of one request lose their key to a
// claim stored before the request until it expires, between two of them: the first is
// that claim's duplicate, the next takes the key over, and the last is the duplicate of
// the next, as if each had come alone.
func TestRecordBatch_HeldClaimExpiresWithin(t *testing.T) {
	ctx := t.Context()
	db := openEngine(t, postgrestest.NewDatabase(t))
	hour := storage.ClaimOptions{TTL: time.Hour}
	held := testDelivery("evt_1")
	if err := db.Record(ctx, held, hour); err != nil {
		t.Fatal(err)
	}
	b := []*storage.Delivery{testDelivery("evt_1"), testDelivery("evt_1"), testDelivery("evt_1")}
	for i, after := range []time.Duration{30 * time.Minute, 2 * time.Hour, 2*time.Hour + time.Minute} {
		b[i].ReceivedAt = held.ReceivedAt.Add(after)
	}
	if err := db.RecordBatch(ctx, b, hour); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		outcome storage.Outcome
		first   int64
	}{{storage.Duplicate, held.ID}, {storage.Accepted, b[1].ID}, {storage.Duplicate, b[1].ID}}
	for i, w := range want {
		if d := b[i]; d.Outcome != w.outcome || d.FirstDelivery != w.first {
			t.Errorf("item %d: %s of %d, want %s of %d", i, d.Outcome, d.FirstDelivery, w.outcome, w.first)
		}
	}
	for _, d := range b {
		got, err := db.Delivery(ctx, d.ID)
		if err != nil || got.Outcome != d.Outcome || got.FirstDelivery != d.FirstDelivery || string(got.Body) != string(d.Body) {
			t.Errorf("stored delivery %d: %+v, %v; want it as recorded", d.ID, got, err)
		}
	}
}
