package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	deliveryReadColumns = deliveryFields + `, money_mismatch, headers, ` + sqlEnvelope + `, ` + sqlBody // with what intake sets after the insert
	deliveryListColumns = deliveryFields + `, money_mismatch, '', '', NULL`
	// deliveryInsertColumns are the columns the writer inserts: a delivery whole,
	// body_from and by_claim.
	deliveryInsertColumns = deliveryFields + `, headers, batch_envelope, body, body_from, by_claim`

	// sqlBody is a delivery's body, in a query of the deliveries table not aliased: its
	// own, or (a duplicate whose body was byte for byte its first delivery's) that of
	// the delivery body_from names, which the retention sweep never deletes first
	// (sweep.go). Only a delivery read whole pays for that look-up.
	sqlBody = `CASE WHEN body_from = 0 THEN body ELSE (SELECT b.body FROM deliveries AS b WHERE b.id = deliveries.body_from) END`

	// sqlEnvelope is a delivery's batch envelope, in a query of the deliveries table
	// not aliased: its own, or, an item past the first that stores none, its first
	// item's (the one its batch names), where a request's large envelope is kept once
	// (Delivery.BatchEnvelope). A delivery that came alone, and an item stored before
	// envelopes were kept, read "". Only a delivery read whole pays for the look-up.
	sqlEnvelope = `CASE WHEN batch_envelope <> '' OR batch = 0 OR batch = id THEN batch_envelope
	ELSE coalesce((SELECT f.batch_envelope FROM deliveries AS f WHERE f.id = deliveries.batch), '') END`
)

type scanner interface{ Scan(dest ...any) error }

// scanDelivery reads a row of deliveryReadColumns or deliveryListColumns. Headers are nil
// when the row has none (a listing's).
func scanDelivery(s scanner) (storage.Delivery, error) {
	var d storage.Delivery
	var received int64
	var outcome, headers string
	err := s.Scan(&d.ID, &d.Source, &received, &outcome, &d.Status, &d.Error, &d.Key, &d.KeyMethod,
		&d.KeyFrom, &d.KeyCanonical, &d.PayloadHash, &d.Mismatch, &d.FirstDelivery, &d.Property,
		&d.Booking, &d.EventStatus, &d.Amount, &d.Currency, &d.RemoteAddr, &d.ContentType, &d.Batch, &d.BatchIndex,
		&d.MoneyMismatch, &headers, &d.BatchEnvelope, &d.Body)
	if err != nil {
		return storage.Delivery{}, err
	}
	d.ReceivedAt = fromMillis(received)
	d.Outcome = storage.Outcome(outcome)
	if headers != "" {
		if err := json.Unmarshal([]byte(headers), &d.Headers); err != nil {
			return storage.Delivery{}, fmt.Errorf("delivery %d: headers: %w", d.ID, err)
		}
	}
	return d, nil
}

// DeliveriesKept reports which of the deliveries ids are still stored: retention
// sweeps deliveries, and what names them (a suspect) outlives them. The ids go in as
// one JSON array, so that their number meets no limit of bound parameters.
func (db *DB) DeliveriesKept(ctx context.Context, ids []int64) (map[int64]bool, error) {
	kept := map[int64]bool{}
	if len(ids) == 0 {
		return kept, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("deliveries kept: %w", err)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id FROM deliveries WHERE id IN (SELECT value FROM json_each(?))`, string(list))
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
	row := db.read.QueryRowContext(ctx, `SELECT `+deliveryReadColumns+` FROM deliveries WHERE id = ?`, id)
	d, err := scanDelivery(row)
	if errors.Is(err, sql.ErrNoRows) {
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

// sqlWithReferrers is the ids of the deliveries that match cond, a condition on a key or
// a booking, which its caller repeats in the arguments: cond is written with %[1]s before
// each column, for a table alias. The indexes of keys and bookings hold only the
// deliveries that store their own body (migration 0020); the duplicates that refer to
// one of them for their body share its key and its booking, and are found through the
// index of body_from.
func sqlWithReferrers(cond string) string {
	return `SELECT id FROM deliveries WHERE ` + fmt.Sprintf(cond, "") + ` AND body_from = 0
	UNION ALL
	SELECT r.id FROM deliveries AS o JOIN deliveries AS r ON r.body_from = o.id AND r.body_from != 0
	WHERE ` + fmt.Sprintf(cond, "o.") + ` AND o.body_from = 0`
}

// sqlBookingStretches selects the stretches of 16,384 delivery ids that the deliveries
// stored span, from the lowest id's to the highest's: the first column of the index of
// bookings (migration 0032), which a booking is looked up in once a stretch.
const sqlBookingStretches = `WITH RECURSIVE s (n) AS (SELECT (SELECT min(id) FROM deliveries) / 16384
	UNION ALL SELECT n + 1 FROM s WHERE n < (SELECT max(id) FROM deliveries) / 16384) SELECT n FROM s`

// sqlKeyIDs is the ids of the deliveries of one key: sources is a condition on the
// source, written with %[1]s before the column as sqlWithReferrers' cond is; the
// caller gives its arguments and the key's four times over. The index of
// keys leaves out the accepted deliveries that their claim names (by_claim, migration
// 0022): those are found through the claim, and what refers to either for its body
// through the index of body_from.
func sqlKeyIDs(sources string) string {
	cond := sources + ` AND %[1]skey = ?`
	return `SELECT id FROM deliveries WHERE ` + fmt.Sprintf(cond, "") + ` AND body_from = 0 AND by_claim = 0
	UNION ALL
	SELECT o.id FROM claims AS c JOIN deliveries AS o ON o.id = c.first_delivery
	WHERE ` + fmt.Sprintf(cond, "c.") + ` AND o.by_claim != 0
	UNION ALL
	SELECT r.id FROM deliveries AS o JOIN deliveries AS r ON r.body_from = o.id AND r.body_from != 0
	WHERE o.id IN (SELECT id FROM deliveries WHERE ` + fmt.Sprintf(cond, "") + ` AND body_from = 0 AND by_claim = 0
		UNION ALL
		SELECT c.first_delivery FROM claims AS c WHERE ` + fmt.Sprintf(cond, "c.") + `)`
}

var sqlKeyDeliveries = `SELECT ` + deliveryReadColumns + ` FROM deliveries WHERE id IN (` +
	sqlKeyIDs(`%[1]ssource = ?`) + `) ORDER BY id LIMIT ?`

// FirstKeyDeliveries returns the first limit stored deliveries of one source's key,
// oldest first (all of them when limit < 0), and whether the key has more. A key can
// gather any number of deliveries (a provider that sends one event id for everything, a
// key field that few values share): pages that show a key must not load them all.
func (db *DB) FirstKeyDeliveries(ctx context.Context, source, key string, limit int) ([]storage.Delivery, bool, error) {
	n := limit
	if limit >= 0 {
		n = limit + 1 // one more says whether there are more
	}
	rows, err := db.read.QueryContext(ctx, sqlKeyDeliveries, source, key, source, key, source, key, source, key, n)
	if err != nil {
		return nil, false, fmt.Errorf("deliveries of %s/%s: %w", source, key, err)
	}
	defer rows.Close()
	var out []storage.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, false, fmt.Errorf("deliveries of %s/%s: %w", source, key, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("deliveries of %s/%s: %w", source, key, err)
	}
	if limit >= 0 && len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

const claimColumns = `id, source, key, state, first_delivery, payload_hash, claimed_at, expires_at,
	updated_at, attempts, next_attempt_at, last_error, ttl, leased_until`

func scanClaim(s scanner) (storage.Claim, error) {
	var c storage.Claim
	var claimed, expires, updated int64
	var next, ttl, leased sql.NullInt64
	err := s.Scan(&c.ID, &c.Source, &c.Key, &c.State, &c.FirstDelivery, &c.PayloadHash, &claimed,
		&expires, &updated, &c.Attempts, &next, &c.LastError, &ttl, &leased)
	if err != nil {
		return storage.Claim{}, err
	}
	if leased.Valid {
		c.LeasedUntil = fromMillis(leased.Int64)
	}
	c.ClaimedAt, c.ExpiresAt, c.UpdatedAt = fromMillis(claimed), fromMillis(expires), fromMillis(updated)
	if next.Valid {
		c.NextAttemptAt = fromMillis(next.Int64)
	}
	if ttl.Valid {
		c.TTL = time.Duration(ttl.Int64) * time.Millisecond
	}
	return c, nil
}

// Claim returns the claim row of one source's key, expired or not. Returns ErrNotFound
// if the key was never claimed or its row was swept.
func (db *DB) Claim(ctx context.Context, source, key string) (storage.Claim, error) {
	row := db.read.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = ? AND key = ?`, source, key)
	c, err := scanClaim(row)
	if errors.Is(err, sql.ErrNoRows) {
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
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	args = append(args, max)
	rows, err := db.read.QueryContext(ctx, `WITH e AS (SELECT id, `+sqlEnvelope+` AS envelope FROM deliveries
	WHERE id IN (`+placeholders(len(ids))+`) AND batch != 0)
SELECT id, octet_length(envelope), CASE WHEN octet_length(envelope) <= ? THEN envelope ELSE '' END FROM e`, args...)
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
// bodies, as listings read them. A request holds at most a bounded number of items (the
// receiver's max_batch_items), so they are read whole. Returns ErrNotFound if none is
// stored.
func (db *DB) BatchDeliveries(ctx context.Context, batch int64) ([]storage.Delivery, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+deliveryListColumns+` FROM deliveries
WHERE batch = ? ORDER BY batch_index`, batch)
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", batch, err)
	}
	defer rows.Close()
	var out []storage.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", batch, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("batch %d: %w", batch, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("batch %d: %w", batch, storage.ErrNotFound)
	}
	return out, nil
}
