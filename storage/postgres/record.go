package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// recordRow is one delivery being recorded, with what its transaction decided, applied
// to d only once that transaction has committed.
type recordRow struct {
	d       *storage.Delivery
	headers string
	claim   storage.ClaimOptions

	id, first, batch int64
	index            int // its place in a request of several events
	outcome          storage.Outcome
	mismatch         bool
	// bodyFrom is the delivery whose body this one's is, byte for byte: a duplicate
	// stores that reference instead of a copy (0: it stores its own body).
	bodyFrom      int64
	moneyMismatch bool
	suspects      []storage.SuspectKind
}

// Record stores d and, unless d is a rejection, claims its key: the delivery is Accepted
// when it wins the claim (a new key, or one whose claim expired or was released) and a
// Duplicate of the claim's first delivery otherwise. Exactly one of any number of
// concurrent deliveries of a key wins, on whichever replica it arrives: the claim is one
// INSERT … ON CONFLICT … DO UPDATE … WHERE, which PostgreSQL serializes on the key's
// row. d's ID, Outcome, FirstDelivery, Mismatch and forensic flags are set once the
// transaction holding it has committed; an error means nothing of it was stored.
func (db *DB) Record(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error {
	return db.record(ctx, claim, false, d)
}

// RecordBatch stores the items of one request that carried several events, each as
// Record stores one, all in one transaction; each item's Batch is the first item's id
// and BatchIndex its place.
func (db *DB) RecordBatch(ctx context.Context, items []*storage.Delivery, claim storage.ClaimOptions) error {
	if len(items) == 0 {
		return errors.New("record batch: no items")
	}
	for i, d := range items {
		if d.Outcome == storage.Rejected {
			return fmt.Errorf("record batch: item %d is a rejection", i)
		}
	}
	return db.record(ctx, claim, true, items...)
}

func (db *DB) record(ctx context.Context, claim storage.ClaimOptions, batch bool, ds ...*storage.Delivery) error {
	rows := make([]recordRow, len(ds))
	now := db.Now()
	for i, d := range ds {
		if d.Outcome != storage.Rejected && d.Key == "" {
			return fmt.Errorf("record delivery %d: empty key", i)
		}
		if d.ReceivedAt.IsZero() {
			d.ReceivedAt = now
		}
		headers := "{}"
		if len(d.Headers) > 0 {
			headers = string(storage.AppendHeadersJSON(make([]byte, 0, 512), d.Headers))
		}
		rows[i] = recordRow{d: d, headers: headers, claim: claim}
	}
	ptrs := make([]*recordRow, len(rows))
	for i := range rows {
		ptrs[i] = &rows[i]
	}
	err := db.writeTx(ctx, func(tx pgx.Tx) error { return db.recordTx(ctx, tx, batch, ptrs) })
	if err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	for _, r := range rows {
		d := r.d
		d.ID, d.Outcome, d.FirstDelivery, d.Mismatch = r.id, r.outcome, r.first, r.mismatch
		d.Batch, d.BatchIndex = r.batch, r.index
		d.MoneyMismatch, d.Suspects = r.moneyMismatch, r.suspects
	}
	return nil
}

// recordTx writes rows in tx: it takes their ids, claims their keys in order (a later
// row of a key that an earlier one won is that one's duplicate), runs the forensic
// checks and inserts the deliveries. It may run again from the start when PostgreSQL
// aborts tx (writeTx), so it resets every result first.
func (db *DB) recordTx(ctx context.Context, tx pgx.Tx, batch bool, rows []*recordRow) error {
	ids := make([]int64, 0, len(rows))
	idRows, err := tx.Query(ctx, `SELECT nextval('delivery_ids') FROM generate_series(1, $1)`, len(rows))
	if err != nil {
		return fmt.Errorf("take delivery ids: %w", err)
	}
	ids, err = pgx.AppendRows(ids, idRows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("take delivery ids: %w", err)
	}
	var ask []*recordRow
	for i, r := range rows {
		r.id, r.outcome, r.first, r.mismatch, r.bodyFrom = ids[i], r.d.Outcome, 0, false, 0
		r.moneyMismatch, r.suspects, r.batch, r.index = false, nil, 0, 0
		if batch {
			// Other replicas take ids meanwhile: a request's items need not have
			// consecutive ids, so each keeps its place.
			r.batch, r.index = ids[0], i
		}
		if r.d.Outcome != storage.Rejected {
			ask = append(ask, r)
		}
	}
	if err := db.forensicsBefore(ctx, tx, ask); err != nil {
		return err
	}
	for _, r := range ask {
		if err := db.claimRow(ctx, tx, rows, r); err != nil {
			return err
		}
	}
	for _, r := range rows {
		d := r.d
		body := d.Body
		if r.bodyFrom != 0 {
			body = nil // NULL: the body is delivery bodyFrom's
		}
		_, err := tx.Exec(ctx, `INSERT INTO deliveries (`+deliveryInsertColumns+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)`,
			r.id, d.Source, millis(d.ReceivedAt), string(r.outcome), d.Status, d.Error,
			d.Key, d.KeyMethod, d.KeyFrom, d.KeyCanonical, d.PayloadHash, r.mismatch, r.first,
			d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency, d.RemoteAddr, d.ContentType,
			r.batch, r.index, r.headers, body, r.bodyFrom)
		if err != nil {
			return fmt.Errorf("insert delivery: %w", err)
		}
	}
	return db.forensicsAfter(ctx, tx, rows)
}

// claimRow claims r's key: a new row, or a takeover of an expired or released one; a
// live claim refuses, and r is then a duplicate of the delivery that holds it, perhaps
// a row of this same transaction (rows).
func (db *DB) claimRow(ctx context.Context, tx pgx.Tx, rows []*recordRow, r *recordRow) error {
	d := r.d
	state, next := storage.StateProcessed, (*int64)(nil)
	if r.claim.Dispatch {
		state, next = storage.StateProcessing, nullMillis(d.ReceivedAt)
	}
	at := millis(d.ReceivedAt)
	var won int64
	err := tx.QueryRow(ctx, `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at, next_attempt_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $8)
ON CONFLICT (source, key) DO UPDATE SET
	state = excluded.state, first_delivery = excluded.first_delivery, payload_hash = excluded.payload_hash,
	claimed_at = excluded.claimed_at, expires_at = excluded.expires_at,
	updated_at = excluded.updated_at, next_attempt_at = excluded.next_attempt_at,
	attempts = 0, last_error = ''
WHERE (claims.expires_at <= excluded.claimed_at AND claims.state <> 'processing') OR claims.state = 'released'
RETURNING first_delivery`,
		d.Source, d.Key, state, r.id, d.PayloadHash, at, at+r.claim.TTL.Milliseconds(), next).Scan(&won)
	if err == nil {
		r.outcome, r.first = storage.Accepted, r.id
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("claim %s/%s: %w", d.Source, d.Key, err)
	}
	// Refused: a live claim holds the key. Its row is locked by the INSERT's conflict
	// check until this transaction ends, so it cannot change under the read.
	var hash string
	var same bool
	err = tx.QueryRow(ctx, `SELECT c.first_delivery, c.payload_hash, coalesce(f.body = $3, false)
FROM claims AS c LEFT JOIN deliveries AS f ON f.id = c.first_delivery AND f.body_from = 0
WHERE c.source = $1 AND c.key = $2`, d.Source, d.Key, d.Body).Scan(&r.first, &hash, &same)
	if err != nil {
		return fmt.Errorf("claim %s/%s: refused, and its holder: %w", d.Source, d.Key, err)
	}
	r.outcome, r.mismatch = storage.Duplicate, hash != d.PayloadHash
	for _, o := range rows {
		if o.id == r.first {
			// Won in this transaction: its row is not written yet, its body is at hand.
			same = bytes.Equal(o.d.Body, d.Body)
		}
	}
	if same && !r.mismatch && len(d.Body) > 0 {
		r.bodyFrom = r.first
	}
	return nil
}
