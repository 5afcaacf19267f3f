package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// deliveryFields are a delivery's columns but its headers and body, in the order that
// scanDelivery reads them and the writer inserts them. Every query that reads deliveries
// selects deliveryReadColumns (a delivery whole) or deliveryListColumns (for listings:
// the headers, batch envelope and body, the bulky columns, left empty and not read).
const (
	deliveryFields = `id, source, received_at, outcome, status, error, key, key_method, key_from,
	key_canonical, payload_hash, mismatch, first_delivery, property, booking, event_status, amount,
	currency, remote_addr, content_type, batch, batch_index`
	deliveryReadColumns = deliveryFields + `, money_mismatch, headers, ` + sqlEnvelope + `, ` + sqlBody
	deliveryListColumns = deliveryFields + `, money_mismatch, '', '', NULL::bytea`
	// deliveryInsertColumns are the columns the writer inserts: a delivery whole, and
	// body_from.
	deliveryInsertColumns = deliveryFields + `, headers, batch_envelope, body, body_from`

	// sqlBody is a delivery's body, in a query of the deliveries table not aliased: its
	// own, or (a duplicate whose body was byte for byte its first delivery's) that of
	// the delivery body_from names, which the retention sweep never deletes first.
	sqlBody = `CASE WHEN body_from = 0 THEN body ELSE (SELECT b.body FROM deliveries AS b WHERE b.id = deliveries.body_from) END`

	// sqlEnvelope is a delivery's batch envelope, in a query of the deliveries table
	// not aliased: its own, or, an item past the first that stores none, its first
	// item's (the one its batch names), where intake keeps a request's envelope once
	// (Delivery.BatchEnvelope). A delivery that came alone, and an item stored before
	// envelopes were kept, read "". Only a delivery read whole pays for the look-up.
	sqlEnvelope = `CASE WHEN deliveries.batch_envelope <> '' OR deliveries.batch = 0 OR deliveries.batch = deliveries.id
	THEN deliveries.batch_envelope
	ELSE coalesce((SELECT f.batch_envelope FROM deliveries AS f WHERE f.id = deliveries.batch), '') END`
)

// envelopeOf is sqlEnvelope of the delivery that alias names.
func envelopeOf(alias string) string {
	return strings.ReplaceAll(sqlEnvelope, "deliveries.", alias+".")
}

type scanner interface{ Scan(dest ...any) error }

// scanDelivery reads a row of deliveryReadColumns or deliveryListColumns. Headers are nil
// when the row has none (a listing's).
func scanDelivery(s scanner) (storage.Delivery, error) {
	var d storage.Delivery
	var received int64
	var outcome, headers string
	var batchIndex int32
	err := s.Scan(&d.ID, &d.Source, &received, &outcome, &d.Status, &d.Error, &d.Key, &d.KeyMethod,
		&d.KeyFrom, &d.KeyCanonical, &d.PayloadHash, &d.Mismatch, &d.FirstDelivery, &d.Property,
		&d.Booking, &d.EventStatus, &d.Amount, &d.Currency, &d.RemoteAddr, &d.ContentType, &d.Batch, &batchIndex,
		&d.MoneyMismatch, &headers, &d.BatchEnvelope, &d.Body)
	if err != nil {
		return storage.Delivery{}, err
	}
	d.BatchIndex = int(batchIndex)
	d.ReceivedAt = fromMillis(received)
	d.Outcome = storage.Outcome(outcome)
	if headers != "" {
		if err := json.Unmarshal([]byte(headers), &d.Headers); err != nil {
			return storage.Delivery{}, fmt.Errorf("delivery %d: headers: %w", d.ID, err)
		}
	}
	return d, nil
}

// claimColumns are a claim's columns, in the order scanClaim reads them.
const claimColumns = `id, source, key, state, first_delivery, payload_hash, claimed_at, expires_at,
	updated_at, attempts, next_attempt_at, last_error, ttl, leased_until`

func scanClaim(s scanner) (storage.Claim, error) {
	var c storage.Claim
	var claimed, expires, updated int64
	var next, ttl, leased *int64
	var attempts int32
	err := s.Scan(&c.ID, &c.Source, &c.Key, &c.State, &c.FirstDelivery, &c.PayloadHash, &claimed,
		&expires, &updated, &attempts, &next, &c.LastError, &ttl, &leased)
	if err != nil {
		return storage.Claim{}, err
	}
	if leased != nil {
		c.LeasedUntil = fromMillis(*leased)
	}
	c.Attempts = int(attempts)
	c.ClaimedAt, c.ExpiresAt, c.UpdatedAt = fromMillis(claimed), fromMillis(expires), fromMillis(updated)
	if next != nil {
		c.NextAttemptAt = fromMillis(*next)
	}
	if ttl != nil {
		c.TTL = time.Duration(*ttl) * time.Millisecond
	}
	return c, nil
}

// DeliveriesKept reports which of the deliveries ids are still stored: retention
// sweeps deliveries, and what names them (a suspect) outlives them.
func (db *DB) DeliveriesKept(ctx context.Context, ids []int64) (map[int64]bool, error) {
	kept := map[int64]bool{}
	if len(ids) == 0 {
		return kept, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT id FROM deliveries WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("deliveries kept: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("deliveries kept: %w", err)
		}
		kept[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("deliveries kept: %w", err)
	}
	return kept, nil
}

// Delivery returns the delivery with the given id. Returns ErrNotFound if there is none.
func (db *DB) Delivery(ctx context.Context, id int64) (storage.Delivery, error) {
	d, err := scanDelivery(db.pool.QueryRow(ctx, `SELECT `+deliveryReadColumns+` FROM deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Delivery{}, fmt.Errorf("delivery %d: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Delivery{}, fmt.Errorf("delivery %d: %w", id, err)
	}
	return d, nil
}

// KeyDeliveries returns every stored delivery of one source's key, oldest first.
func (db *DB) KeyDeliveries(ctx context.Context, source, key string) ([]storage.Delivery, error) {
	out, _, err := db.FirstKeyDeliveries(ctx, source, key, -1)
	return out, err
}

// FirstKeyDeliveries returns the first limit stored deliveries of one source's key,
// oldest first (all of them when limit < 0), and whether the key has more.
func (db *DB) FirstKeyDeliveries(ctx context.Context, source, key string, limit int) ([]storage.Delivery, bool, error) {
	if !textOK(source, key) {
		return nil, false, nil // never stored: intake refuses such a key
	}
	var n *int
	if limit >= 0 {
		more := limit + 1 // one more says whether there are more
		n = &more
	}
	out, err := collectDeliveries(db.pool.Query(ctx, `SELECT `+deliveryReadColumns+` FROM deliveries
WHERE source = $1 AND key = $2 ORDER BY id LIMIT $3`, source, key, n))
	if err != nil {
		return nil, false, fmt.Errorf("deliveries of %s/%s: %w", source, key, err)
	}
	if limit >= 0 && len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Claim returns the claim row of one source's key, expired or not. Returns ErrNotFound
// if the key was never claimed or its row was swept.
func (db *DB) Claim(ctx context.Context, source, key string) (storage.Claim, error) {
	if !textOK(source, key) {
		return storage.Claim{}, fmt.Errorf("key %q/%q: %w", source, key, storage.ErrNotFound)
	}
	c, err := scanClaim(db.pool.QueryRow(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = $1 AND key = $2`, source, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Claim{}, fmt.Errorf("key %s/%s: %w", source, key, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Claim{}, fmt.Errorf("key %s/%s: %w", source, key, err)
	}
	return c, nil
}

// BatchEnvelopes returns the batch envelope of each of the deliveries ids that has one,
// by delivery id, as Delivery reads it (its own, or its first item's), its text only
// when it is max bytes or fewer: a larger one's text is not returned, only its size.
func (db *DB) BatchEnvelopes(ctx context.Context, ids []int64, max int) (map[int64]storage.EnvelopeText, error) {
	out := map[int64]storage.EnvelopeText{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT id, octet_length(envelope),
	CASE WHEN octet_length(envelope) <= $2 THEN envelope ELSE '' END
FROM (SELECT id, `+sqlEnvelope+` AS envelope FROM deliveries WHERE id = ANY($1) AND batch <> 0) AS e`, ids, max)
	if err != nil {
		return nil, fmt.Errorf("batch envelopes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var e storage.EnvelopeText
		if err := rows.Scan(&id, &e.Size, &e.Text); err != nil {
			return nil, fmt.Errorf("batch envelopes: %w", err)
		}
		if e.Size > 0 {
			out[id] = e
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("batch envelopes: %w", err)
	}
	return out, nil
}

// BatchDeliveries returns the item deliveries of one batched request (batch is the id
// of its first item's delivery), in the request's order, without their headers and
// bodies, as listings read them. Returns ErrNotFound if none is stored.
func (db *DB) BatchDeliveries(ctx context.Context, batch int64) ([]storage.Delivery, error) {
	out, err := collectDeliveries(db.pool.Query(ctx, `SELECT `+deliveryListColumns+` FROM deliveries
WHERE batch = $1 ORDER BY batch_index`, batch))
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", batch, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("batch %d: %w", batch, storage.ErrNotFound)
	}
	return out, nil
}

// collectDeliveries reads every row of a query of deliveryReadColumns or
// deliveryListColumns, and closes them.
func collectDeliveries(rows pgx.Rows, err error) ([]storage.Delivery, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
