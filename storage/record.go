package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Outcome is what became of a delivery.
type Outcome string

// The outcomes of a delivery.
const (
	Accepted  Outcome = "accepted"  // it won its key's claim
	Duplicate Outcome = "duplicate" // its key was already claimed
	Rejected  Outcome = "rejected"  // it failed a check before any claim
)

// Delivery is one HTTP delivery of a webhook, as received and as stored.
type Delivery struct {
	ID         int64
	Source     string
	ReceivedAt time.Time // set by Record from DB.Now when zero
	Outcome    Outcome   // Rejected on input records a rejection; otherwise Record decides
	Status     int       // the HTTP status answered
	Error      string    // why it was rejected

	Key          string
	KeyMethod    string // "event_id" or "derived"
	KeyFrom      string // the pointer or header an event id came from
	KeyCanonical string // the canonical JSON a derived key hashes
	PayloadHash  string

	Mismatch      bool  // a duplicate whose payload differs from the first delivery's
	FirstDelivery int64 // for a duplicate: the delivery that won the claim

	// Business fields read from the body, for the console's filters and sums.
	Property, Booking, EventStatus, Amount string

	RemoteAddr  string
	ContentType string
	Headers     http.Header
	Body        []byte
}

// ClaimOptions says how a delivery's key is claimed.
type ClaimOptions struct {
	// TTL is the dedup window: the claim expires this long after it is made.
	TTL time.Duration
	// Dispatch marks the event for hand-off downstream (state processing); without it
	// the key goes straight to processed.
	Dispatch bool
}

// Key states.
const (
	StateProcessing = "processing"
	StateProcessed  = "processed"
	StateFailed     = "failed"
	StateReleased   = "released"
)

type recordReq struct {
	d       *Delivery
	claim   ClaimOptions
	headers string
	done    chan error

	// results, applied to d only once the transaction that holds them has committed
	id, first int64
	outcome   Outcome
	mismatch  bool
}

// recordReqs recycles requests and their channels: intake makes one per delivery.
var recordReqs = sync.Pool{New: func() any { return &recordReq{done: make(chan error, 1)} }}

// Record stores d and, unless d is a rejection, claims its key: the delivery is Accepted
// when it wins the claim (no row, an expired row or a released row for its source and
// key) and Duplicate otherwise. On success d.ID, d.Outcome, d.Status, d.FirstDelivery and
// d.Mismatch are set, and the delivery and claim are committed. Concurrent calls share
// one transaction and one fsync (group commit); each returns only after the commit that
// holds its rows. An error means nothing of d was stored.
func (db *DB) Record(ctx context.Context, d *Delivery, claim ClaimOptions) error {
	if d.Outcome != Rejected && d.Key == "" {
		return errors.New("record delivery: empty key")
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = db.Now()
	}
	headers := "{}"
	if len(d.Headers) > 0 {
		b, err := json.Marshal(d.Headers)
		if err != nil {
			return fmt.Errorf("record delivery: headers: %w", err)
		}
		headers = string(b)
	}
	r := recordReqs.Get().(*recordReq)
	r.d, r.claim, r.headers = d, claim, headers
	select {
	case db.reqs <- r:
	case <-db.closing:
		r.d = nil
		recordReqs.Put(r)
		return ErrClosed
	case <-ctx.Done():
		r.d = nil
		recordReqs.Put(r)
		return ctx.Err()
	}
	// Once queued, the write happens whatever the caller does; wait for its verdict so
	// that the answer never claims more than what was committed.
	err := <-r.done
	if err == nil {
		d.ID, d.Outcome, d.FirstDelivery, d.Mismatch = r.id, r.outcome, r.first, r.mismatch
		if d.Outcome != Rejected {
			d.Status = http.StatusOK
		}
	}
	// The writer let go of r when it answered on r.done.
	*r = recordReq{done: r.done}
	recordReqs.Put(r)
	return err
}

// writer is the single goroutine that commits intake writes. It takes what is already
// queued (up to maxBatch) without waiting for more: under load the queue fills while the
// previous batch commits, and when idle a lone delivery commits at once.
func (db *DB) writer() {
	defer close(db.writerDone)
	w := &batchWriter{db: db}
	defer w.close()
	batch := make([]*recordReq, 0, db.maxBatch)
	for {
		var first *recordReq
		select {
		case first = <-db.reqs:
		case <-db.closing:
			// Commit what was queued before Close, then stop.
			for {
				select {
				case r := <-db.reqs:
					w.commit(append(batch[:0], r))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < db.maxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		w.commit(batch)
		clear(batch) // drop the requests: their callers recycle them
	}
}

const (
	// The last delivery id. Inside the batch's IMMEDIATE transaction no other writer
	// can insert, so the batch numbers its deliveries itself from here: the claim can
	// name its first delivery as it is made, instead of a third statement setting it.
	sqlLastDelivery = `SELECT coalesce(max(id), 0) FROM deliveries`

	// The claim: a new row, or a takeover of an expired or released one. It changes no
	// row when a live claim holds the key.
	sqlClaim = `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at, next_attempt_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6, ?8)
ON CONFLICT (source, key) DO UPDATE SET
	state = excluded.state, first_delivery = excluded.first_delivery, payload_hash = excluded.payload_hash,
	claimed_at = excluded.claimed_at, expires_at = excluded.expires_at,
	updated_at = excluded.updated_at, next_attempt_at = excluded.next_attempt_at,
	attempts = 0, last_error = ''
WHERE claims.expires_at <= excluded.claimed_at OR claims.state = 'released'`

	sqlClaimHolder = `SELECT first_delivery, payload_hash FROM claims WHERE source = ? AND key = ?`

	sqlInsertDelivery = `
INSERT INTO deliveries (id, source, received_at, outcome, status, error, key, key_method, key_from,
	key_canonical, payload_hash, mismatch, first_delivery, property, booking, event_status, amount,
	remote_addr, content_type, headers, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// batchWriter is the writer goroutine's state: its statements, prepared once on the
// write connection and bound to each batch's transaction, so that intake never pays
// SQLite's parse and plan (the insert's trigger included) per delivery.
type batchWriter struct {
	db                           *DB
	last, claim, holder, deliver *sql.Stmt
}

func (w *batchWriter) prepare(ctx context.Context) error {
	if w.deliver != nil {
		return nil
	}
	for _, s := range []struct {
		dst   **sql.Stmt
		query string
	}{{&w.last, sqlLastDelivery}, {&w.claim, sqlClaim}, {&w.holder, sqlClaimHolder}, {&w.deliver, sqlInsertDelivery}} {
		stmt, err := w.db.write.PrepareContext(ctx, s.query)
		if err != nil {
			w.close()
			return fmt.Errorf("prepare: %w", err)
		}
		*s.dst = stmt
	}
	return nil
}

func (w *batchWriter) close() {
	for _, s := range []**sql.Stmt{&w.last, &w.claim, &w.holder, &w.deliver} {
		if *s != nil {
			(*s).Close()
			*s = nil
		}
	}
}

// commit writes batch in one transaction. If that fails, each request is retried in a
// transaction of its own, so that one bad request cannot fail the others.
func (w *batchWriter) commit(batch []*recordReq) {
	err := w.commitTx(batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			r.done <- w.commitTx([]*recordReq{r})
		}
		return
	}
	for _, r := range batch {
		r.done <- err
	}
}

func (w *batchWriter) commitTx(batch []*recordReq) error {
	ctx := context.Background()
	if err := w.prepare(ctx); err != nil {
		return err
	}
	tx, err := w.db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	ts := txStmts{
		claim:   tx.StmtContext(ctx, w.claim),
		holder:  tx.StmtContext(ctx, w.holder),
		deliver: tx.StmtContext(ctx, w.deliver),
	}
	var last int64
	if err := tx.StmtContext(ctx, w.last).QueryRowContext(ctx).Scan(&last); err != nil {
		return fmt.Errorf("last delivery: %w", err)
	}
	for i, r := range batch {
		if err := ts.recordOne(ctx, r, last+int64(i)+1); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// txStmts are the writer's statements bound to one transaction.
type txStmts struct{ claim, holder, deliver *sql.Stmt }

// recordOne claims r's key (unless r is a rejection) and stores r's delivery as id.
func (ts txStmts) recordOne(ctx context.Context, r *recordReq, id int64) error {
	d := r.d
	r.id, r.outcome, r.first, r.mismatch = id, d.Outcome, 0, false
	status := d.Status
	if d.Outcome != Rejected {
		status = http.StatusOK
		state, next := StateProcessed, sql.NullInt64{}
		if r.claim.Dispatch {
			state, next = StateProcessing, nullMillis(d.ReceivedAt)
		}
		at := millis(d.ReceivedAt)
		res, err := ts.claim.ExecContext(ctx, d.Source, d.Key, state, id, d.PayloadHash,
			at, at+r.claim.TTL.Milliseconds(), next)
		if err != nil {
			return fmt.Errorf("claim %s/%s: %w", d.Source, d.Key, err)
		}
		won, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("claim %s/%s: %w", d.Source, d.Key, err)
		}
		if won == 1 {
			r.outcome, r.first = Accepted, id
		} else {
			// The upsert's WHERE refused: a live claim holds the key.
			var hash string
			if err := ts.holder.QueryRowContext(ctx, d.Source, d.Key).Scan(&r.first, &hash); err != nil {
				return fmt.Errorf("claim %s/%s: read holder: %w", d.Source, d.Key, err)
			}
			r.outcome = Duplicate
			r.mismatch = hash != d.PayloadHash
		}
	}
	_, err := ts.deliver.ExecContext(ctx, id, d.Source, millis(d.ReceivedAt), string(r.outcome),
		status, d.Error, d.Key, d.KeyMethod, d.KeyFrom, d.KeyCanonical, d.PayloadHash, r.mismatch,
		r.first, d.Property, d.Booking, d.EventStatus, d.Amount, d.RemoteAddr, d.ContentType, r.headers, d.Body)
	if err != nil {
		return fmt.Errorf("insert delivery: %w", err)
	}
	return nil
}
