package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// writerDelivery is a delivery whose business key is business, as intake records it.
func writerDelivery(key, business string, body []byte) *storage.Delivery {
	return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h-" + key,
		Body: body, ContentType: "application/json", BusinessKey: business,
		Correlations: []storage.CorrelationKey{{Rule: "r", Hash: "c-" + business, Window: time.Hour}}}
}

var writerClaim = storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}

// writeConnIdle fails t unless the write connection, between two writes, has no
// transaction open.
func writeConnIdle(t *testing.T, db *DB) {
	conn, err := db.write.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Raw(func(dc any) error {
		if !dc.(*sqlite3.SQLiteConn).AutoCommit() {
			t.Errorf("the write connection has a transaction open between writes")
		}
		return nil
	})
}

// openBeside opens a database in a temporary directory with opt, and a pool of plain
// connections to its file beside it, as another process would have; both are closed
// when t ends.
func openBeside(t *testing.T, opt Options) (*DB, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return db, raw
}

// storedKeys counts the deliveries of key on a read connection.
func storedKeys(t *testing.T, db *DB, key string) int {
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM deliveries WHERE key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A batch whose COMMIT fails for a full disk is answered an error and leaves nothing
// stored and no transaction open: once there is room again, the next delivery of its
// key is accepted, and the other writes commit.
func TestWriter_CommitOnFullDisk(t *testing.T) {
	// 1 MiB bodies fail at the COMMIT; 12 MiB, more than the writer's page cache,
	// spill into the log in the middle of the batch's statements.
	for _, size := range []int{1 << 20, 12 << 20} {
		t.Run(fmt.Sprint(size>>20, "MiB"), func(t *testing.T) { fullDisk(t, size) })
	}
}

func fullDisk(t *testing.T, size int) {
	mnt := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	ctx := context.Background()
	db, err := Open(filepath.Join(mnt, "hookdedup.db"), Options{NoReadAhead: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Record(ctx, writerDelivery("small", "B0", []byte(`{}`)), writerClaim); err != nil {
		t.Fatal(err)
	}
	// Fill the disk.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()
	failed := 0
	for i := range 4 {
		big := writerDelivery(fmt.Sprintf("big-%d", i), fmt.Sprintf("BB%d", i), bytes.Repeat([]byte("x"), size))
		if err := db.Record(ctx, big, writerClaim); err != nil {
			failed++
			t.Logf("on a full disk: %v", err)
		}
	}
	if failed == 0 {
		t.Skip("no write failed on the full disk")
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	writeConnIdle(t, db)
	for i := range 4 {
		key := fmt.Sprintf("big-%d", i)
		n := storedKeys(t, db, key)
		d := writerDelivery(key, fmt.Sprintf("BB%d", i), []byte(`{}`))
		if err := db.Record(ctx, d, writerClaim); err != nil {
			t.Fatalf("once there is room: %v", err)
		}
		if n == 0 && d.Outcome != storage.Accepted {
			t.Errorf("%s, not stored, is %s when delivered again, want accepted", key, d.Outcome)
		}
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("ping once there is room: %v", err)
	}
	writeConnIdle(t, db)
}

// The write connection holds no read snapshot between batches, whatever statements the
// batches ran and kept prepared: a checkpoint through another connection copies the
// whole log and starts it over.
func TestWriter_NoSnapshotBetweenBatches(t *testing.T) {
	ctx := context.Background()
	db, raw := openBeside(t, Options{NoReadAhead: true})
	for i := range 40 {
		d := writerDelivery(fmt.Sprintf("k%d", i), fmt.Sprintf("B%d", i%7), []byte(`{"a":1}`))
		if err := db.Record(ctx, d, writerClaim); err != nil {
			t.Fatal(err)
		}
		if err := db.Record(ctx, writerDelivery(fmt.Sprintf("k%d", i), "", []byte(`{"a":1}`)), writerClaim); err != nil {
			t.Fatal(err)
		}
	}
	writeConnIdle(t, db)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var busy, log, done int
		if err := raw.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &done); err != nil {
			var se sqlite3.Error
			if !errors.As(err, &se) || se.Code != sqlite3.ErrBusy {
				t.Fatal(err)
			}
			busy = 1
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a checkpoint could not start the log over: busy %d, %d of %d pages", busy, done, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The writer's statements found by their text in the connection's cache stay right
// when other writes push them out of it, when another connection changes the schema,
// and when the write connection is replaced.
func TestWriter_StatementsEvictedReplacedAndSchemaChanged(t *testing.T) {
	ctx := context.Background()
	db, raw := openBeside(t, Options{NoReadAhead: true})
	seq := 0
	check := func(what string) {
		seq++
		first := writerDelivery(fmt.Sprintf("%s-a-%d", what, seq), fmt.Sprintf("B-%d", seq), []byte(`{"x":1}`))
		if err := db.Record(ctx, first, writerClaim); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		again := writerDelivery(first.Key, "", []byte(`{"x":1}`))
		double := writerDelivery(fmt.Sprintf("%s-b-%d", what, seq), first.BusinessKey, []byte(`{"x":2}`))
		if err := db.RecordBatch(ctx, []*storage.Delivery{again, double}, writerClaim); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if first.Outcome != storage.Accepted || again.Outcome != storage.Duplicate || again.FirstDelivery != first.ID {
			t.Errorf("%s: outcomes %s, %s (first %d of %d)", what, first.Outcome, again.Outcome, again.FirstDelivery, first.ID)
		}
		found := false
		for _, k := range double.Suspects {
			found = found || k == storage.SuspectBusinessKey
		}
		if !found {
			t.Errorf("%s: a business key repeated under another key: flags %v", what, double.Suspects)
		}
		writeConnIdle(t, db)
	}
	check("at first")
	for i := range 3 * writeStmtCache {
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			var n int
			return tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d + ?`, i), 1).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check("pushed out of the cache")
	if _, err := raw.Exec(`CREATE INDEX deliveries_test_status ON deliveries (status, key)`); err != nil {
		t.Fatal(err)
	}
	check("an index added")
	if _, err := raw.Exec(`DROP INDEX deliveries_test_status`); err != nil {
		t.Fatal(err)
	}
	check("an index dropped")
	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	discard(conn, nil)
	conn.Close()
	check("the connection replaced")
}

// A request whose statement ends the whole transaction (a trigger's RAISE(ROLLBACK)),
// or whose COMMIT fails and leaves it open (a deferred foreign key it breaks), fails
// alone: the batch is written again request by request, the others are stored, and no
// transaction is left open on the write connection.
func TestWriter_OneRequestFailsTheTransaction(t *testing.T) {
	for _, c := range []struct{ name, schema string }{
		{"rollback", `CREATE TRIGGER poison_rollback BEFORE INSERT ON deliveries WHEN NEW.key = 'poison'
BEGIN SELECT RAISE(ROLLBACK, 'forced rollback'); END`},
		{"commit", `CREATE TABLE commit_parent (id INTEGER PRIMARY KEY);
CREATE TABLE commit_child (p INTEGER REFERENCES commit_parent (id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER poison_commit AFTER INSERT ON deliveries WHEN NEW.key = 'poison'
BEGIN INSERT INTO commit_child VALUES (42); END`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db, raw := openBeside(t, Options{NoReadAhead: true, MaxBatch: 64})
			if _, err := raw.Exec(c.schema); err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				items := []*storage.Delivery{
					writerDelivery(fmt.Sprintf("ok-%d-a", round), fmt.Sprintf("R%d", round), []byte(`{}`)),
					writerDelivery("poison", "P", []byte(`{}`)),
					writerDelivery(fmt.Sprintf("ok-%d-b", round), fmt.Sprintf("R%d", round), []byte(`{}`)),
				}
				errs := make(chan error, len(items))
				for _, d := range items {
					go func() { errs <- db.Record(ctx, d, writerClaim) }()
				}
				failed := 0
				for range items {
					if err := <-errs; err != nil {
						failed++
					}
				}
				if failed != 1 {
					t.Errorf("round %d: %d deliveries failed, want the poisoned one alone", round, failed)
				}
				for _, d := range items {
					if n := storedKeys(t, db, d.Key); (d.Key == "poison") != (n == 0) {
						t.Errorf("round %d: %s stored %d times", round, d.Key, n)
					}
				}
				writeConnIdle(t, db)
			}
			if err := db.Ping(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// While another process holds the write lock past the busy timeout, batches fail at
// their BEGIN; once it lets go, the writer and the other writes go on, with no
// transaction left open.
func TestWriter_LockHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	db, raw := openBeside(t, Options{NoReadAhead: true, BusyTimeout: 200 * time.Millisecond})
	if err := db.Record(ctx, writerDelivery("before", "B0", []byte(`{}`)), writerClaim); err != nil {
		t.Fatal(err)
	}
	other, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, writerDelivery("during", "B1", []byte(`{}`)), writerClaim); err == nil {
		t.Fatal("a delivery was stored while another process held the write lock")
	}
	if _, err := other.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	other.Close()
	writeConnIdle(t, db)
	d := writerDelivery("during", "B1", []byte(`{}`))
	if err := db.Record(ctx, d, writerClaim); err != nil {
		t.Fatal(err)
	}
	if d.Outcome != storage.Accepted {
		t.Errorf("the delivery refused before is %s, want accepted", d.Outcome)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
