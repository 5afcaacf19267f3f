package storagetest

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver, for a connection of BulkLoad's own

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// BookingOf is the booking of the delivery of key: a hash of it, so that bookings, like
// the bookings that cancellations and refunds name (made weeks or months before, in any
// order), land all over the booking index rather than at its right edge, and every
// delivery of one key names one booking.
func BookingOf(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("BK-%012x", h.Sum64()>>16)
}

// Fill says what BulkLoad writes: Keys claims of one source, each with the accepted
// delivery that won it, as intake would have stored them. Each delivery's booking is its key's
// BookingOf.
type Fill struct {
	Source string
	Keys   int
	// Key is key i. Keys ascending in i load several times faster (appends to the
	// indexes instead of random inserts); spread them over the key space that the
	// benchmark's own traffic uses, so that its claims land among them.
	Key func(i int) string
	// ClaimedAt is when the claims were made and their deliveries received; they expire
	// TTL later, so ClaimedAt more than TTL ago makes expired claims for a sweep.
	ClaimedAt time.Time
	TTL       time.Duration
	// Headers (JSON, as stored) and Body(i) are each delivery's.
	Headers string
	Body    func(i int) []byte
	// Batch is how many keys one transaction writes; default 50,000.
	Batch int
	// State is every claim's state, storage.StateProcessed if empty;
	// storage.StateProcessing or storage.StateFailed make keys that a downstream outage
	// left unsettled, entered at ClaimedAt.
	State string
}

// BulkLoad fills db with f's claims and deliveries, in big transactions, for tests and
// benchmarks that need many keys already stored: at millions of keys, Record would
// take hours. progress, if not nil, is called after each transaction with the number
// of keys written so far. The rows are written through a connection of BulkLoad's own
// to db's file, bypassing the group commit and its checks; a key that is already
// claimed fails the load.
func BulkLoad(ctx context.Context, db *sqlite.DB, f Fill, progress func(done int)) error {
	if f.Batch <= 0 {
		f.Batch = 50_000
	}
	if f.State == "" {
		f.State = storage.StateProcessed
	}
	pool, err := sql.Open("sqlite3", loaderDSN(db.Path()))
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	defer pool.Close()
	conn, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	defer conn.Close()
	// Statement journals in memory, as storage keeps them on its own connections, and
	// a page cache that holds the key indexes' pages that the load keeps coming back to:
	// with SQLite's 2 MiB, filling 5 M keys slowed to a few thousand a second.
	for _, pragma := range []string{"PRAGMA temp_store = MEMORY", "PRAGMA cache_size = -1048576"} {
		if _, err := conn.ExecContext(ctx, pragma); err != nil {
			return fmt.Errorf("bulk load: %s: %w", pragma, err)
		}
	}
	for done := 0; done < f.Keys; {
		n := min(f.Batch, f.Keys-done)
		if err := bulkLoad(ctx, conn, f, done, n); err != nil {
			return fmt.Errorf("bulk load at key %d: %w", done, err)
		}
		done += n
		if progress != nil {
			progress(done)
		}
	}
	// Count the new deliveries in the console's hourly totals now, as a running server
	// would have as they came: otherwise the server started next works through the
	// whole backlog while the benchmark measures it.
	for {
		n, err := db.RollupStats(ctx, 200_000)
		if err != nil {
			return fmt.Errorf("bulk load: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}

// loaderDSN is the data source name of a connection to the database file at path that
// writes with BEGIN IMMEDIATE and waits for locks as storage's own do.
func loaderDSN(path string) string {
	params := url.Values{}
	params.Set("_busy_timeout", "5000")
	params.Set("_foreign_keys", "on")
	params.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
}

func bulkLoad(ctx context.Context, conn *sql.Conn, f Fill, from, n int) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Triggers on the two tables, if any, are set aside for the load: a trigger makes
	// every insert keep a statement journal (a copy of each page it touches that the
	// transaction had already changed), which in transactions this big costs more than
	// the insert itself. They are back, unchanged, when the transaction commits, and
	// what they would have maintained is not maintained for the filled rows.
	triggers, err := bulkTriggers(ctx, tx)
	if err != nil {
		return err
	}
	for _, tr := range triggers {
		if _, err := tx.ExecContext(ctx, `DROP TRIGGER "`+strings.ReplaceAll(tr.name, `"`, `""`)+`"`); err != nil {
			return fmt.Errorf("set trigger %s aside: %w", tr.name, err)
		}
	}
	// The ids come from the deliveries' sequence, as intake takes them: an id is never
	// issued twice.
	var last int64
	if err := tx.QueryRowContext(ctx, `UPDATE delivery_seq
		SET last = max(last, (SELECT coalesce(max(id), 0) FROM deliveries)) + ?1
		WHERE only = 1 RETURNING last - ?1`, n).Scan(&last); err != nil {
		return err
	}
	claim, err := tx.PrepareContext(ctx, `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
VALUES (?1, ?2, ?7, ?3, ?4, ?5, ?6, ?5)`)
	if err != nil {
		return err
	}
	defer claim.Close()
	// Each delivery is the one its claim names, found by its key through the claim and
	// left out of the index of keys, as intake stores it (by_claim).
	deliver, err := tx.PrepareContext(ctx, `
INSERT INTO deliveries (id, source, received_at, outcome, status, error, key, key_method, key_from,
	key_canonical, payload_hash, mismatch, first_delivery, property, booking, event_status, amount,
	currency, remote_addr, content_type, headers, body, by_claim)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`)
	if err != nil {
		return err
	}
	defer deliver.Close()
	at := f.ClaimedAt.UnixMilli()
	expires := at + f.TTL.Milliseconds()
	for i := from; i < from+n; i++ {
		id := last + int64(i-from) + 1
		key := f.Key(i)
		hash := fmt.Sprintf("%064x", i)
		if _, err := claim.ExecContext(ctx, f.Source, key, id, hash, at, expires, f.State); err != nil {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		if _, err := deliver.ExecContext(ctx, id, f.Source, at, string(storage.Accepted), 200, "", key,
			"event_id", "header:webhook-id", "", hash, false, id, fmt.Sprintf("PROP-%06d", i%400),
			BookingOf(key), "cancelled", "412.50", "EUR", "127.0.0.1:40000", "application/json",
			f.Headers, f.Body(i)); err != nil {
			return fmt.Errorf("delivery of %s: %w", key, err)
		}
	}
	for _, tr := range triggers {
		if _, err := tx.ExecContext(ctx, tr.sql); err != nil {
			return fmt.Errorf("restore trigger %s: %w", tr.name, err)
		}
	}
	return tx.Commit()
}

type bulkTrigger struct{ name, sql string }

func bulkTriggers(ctx context.Context, tx *sql.Tx) ([]bulkTrigger, error) {
	rows, err := tx.QueryContext(ctx,
		`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('claims', 'deliveries')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bulkTrigger
	for rows.Next() {
		var tr bulkTrigger
		if err := rows.Scan(&tr.name, &tr.sql); err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	return out, rows.Err()
}
