package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// suspectColumns are a suspect's columns, in the order scanSuspect reads them.
const suspectColumns = `id, kind, delivery, other, source, other_source, rule, property, booking, amount,
	currency, first_seen, flagged_at, state, reviewed_by, reviewed_at, reason`

func scanSuspect(s scanner) (storage.Suspect, error) {
	var x storage.Suspect
	var kind string
	var first, flagged, reviewed int64
	err := s.Scan(&x.ID, &kind, &x.Delivery, &x.Other, &x.Source, &x.OtherSource, &x.Rule, &x.Property,
		&x.Booking, &x.Amount, &x.Currency, &first, &flagged, &x.State, &x.ReviewedBy, &reviewed, &x.Reason)
	if err != nil {
		return storage.Suspect{}, err
	}
	x.Kind = storage.SuspectKind(kind)
	x.FirstSeen, x.FlaggedAt, x.ReviewedAt = fromMillis(first), fromMillis(flagged), fromMillis(reviewed)
	return x, nil
}

// collectSuspects reads every row of a query of suspectColumns, and closes them.
func collectSuspects(rows pgx.Rows, err error) ([]storage.Suspect, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.Suspect, error) { return scanSuspect(r) })
}

// Suspects returns one page of the suspects that match f, newest first. Suspects are
// few next to deliveries (a flag is a rare event), so a page is found by their id
// and a look at each row.
func (db *DB) Suspects(ctx context.Context, f storage.SuspectFilter) (storage.SuspectPage, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	where := []string{"true"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Delivery != 0 {
		// Two indexed look-ups, one per column, rather than a scan for either.
		n := arg(f.Delivery)
		where = append(where, "id IN (SELECT id FROM suspects WHERE delivery = "+n+
			" UNION SELECT id FROM suspects WHERE other = "+n+" AND other <> 0)")
	}
	if f.Kind != "" {
		where = append(where, "kind = "+arg(textSafe(string(f.Kind))))
	}
	if f.State != "" {
		where = append(where, "state = "+arg(textSafe(f.State)))
	}
	if f.Source != "" {
		where = append(where, "source = "+arg(textSafe(f.Source)))
	}
	if !f.From.IsZero() {
		where = append(where, "flagged_at >= "+arg(millis(f.From)))
	}
	if !f.To.IsZero() {
		where = append(where, "flagged_at < "+arg(millis(f.To)))
	}
	if f.Before > 0 {
		where = append(where, "id < "+arg(f.Before))
	}
	limit := arg(f.Limit + 1) // one more says whether there is a next page
	list, err := collectSuspects(db.pool.Query(ctx, `SELECT `+suspectColumns+` FROM suspects WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT `+limit, args...))
	if err != nil {
		return storage.SuspectPage{}, fmt.Errorf("suspects: %w", err)
	}
	page := storage.SuspectPage{Suspects: list}
	if len(page.Suspects) > f.Limit {
		page.Suspects = page.Suspects[:f.Limit]
		page.Next = page.Suspects[f.Limit-1].ID
	}
	return page, nil
}

// Suspect returns the suspect with the given id. Returns ErrNotFound if there is none.
func (db *DB) Suspect(ctx context.Context, id int64) (storage.Suspect, error) {
	x, err := scanSuspect(db.pool.QueryRow(ctx, `SELECT `+suspectColumns+` FROM suspects WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Suspect{}, fmt.Errorf("suspect %d: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Suspect{}, fmt.Errorf("suspect %d: %w", id, err)
	}
	return x, nil
}

// SuspectsOf returns the suspects that name any of the deliveries ids, flagged or as
// the other one, by delivery id (a suspect naming two of them is under both), oldest
// first: the flags of a page of the events list, in one query.
func (db *DB) SuspectsOf(ctx context.Context, ids []int64) (map[int64][]storage.Suspect, error) {
	out := map[int64][]storage.Suspect{}
	if len(ids) == 0 {
		return out, nil
	}
	list, err := collectSuspects(db.pool.Query(ctx, `SELECT `+suspectColumns+` FROM suspects WHERE id IN (
	SELECT id FROM suspects WHERE delivery = ANY($1)
	UNION SELECT id FROM suspects WHERE other = ANY($1) AND other <> 0) ORDER BY id`, ids))
	if err != nil {
		return nil, fmt.Errorf("suspects of deliveries: %w", err)
	}
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, x := range list {
		if want[x.Delivery] {
			out[x.Delivery] = append(out[x.Delivery], x)
		}
		if x.Other != 0 && x.Other != x.Delivery && want[x.Other] {
			out[x.Other] = append(out[x.Other], x)
		}
	}
	return out, nil
}

// ReviewSuspect records an operator's verdict on a suspect: state SuspectConfirmed (a
// double) or SuspectDismissed (not a double), with a reason, required, and writes the
// audit row in the same transaction. A suspect already reviewed may be reviewed again
// (the audit row keeps its previous state). Returns ErrNotFound for an unknown id and
// an error wrapping ErrInvalidReview for another state or an empty reason; it returns
// the suspect as reviewed.
//
// The suspect's row is locked as it is read: two operators reviewing it at once, on two
// replicas, are written one after the other, and the second audit row names the state
// the first left. Both first lock the mark of the suspects' totals, in READ COMMITTED,
// as the roll-up does (suspecttotals.go), so that a suspect folded in is moved from its
// old state's total to its new one's.
func (db *DB) ReviewSuspect(ctx context.Context, id int64, actor, state, reason string) (storage.Suspect, error) {
	return db.ReviewSuspectFrom(ctx, id, actor, "", state, reason)
}

// ReviewSuspectFrom is ReviewSuspect of a suspect seen in state from ("" for any): one
// in another state is left as it is, and returned with an error wrapping
// storage.ErrReviewedMeanwhile. The state is compared with the row read in the
// review's own transaction, so of two reviews from one state at once, the second
// finds the first's.
func (db *DB) ReviewSuspectFrom(ctx context.Context, id int64, actor, from, state, reason string) (storage.Suspect, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case state != storage.SuspectConfirmed && state != storage.SuspectDismissed:
		return storage.Suspect{}, fmt.Errorf("review suspect %d: %w: state must be %s or %s, not %q",
			id, storage.ErrInvalidReview, storage.SuspectConfirmed, storage.SuspectDismissed, state)
	case reason == "":
		return storage.Suspect{}, fmt.Errorf("review suspect %d: %w: a reason is required", id, storage.ErrInvalidReview)
	}
	actor, reason = storage.ReplacedText(actor), storage.ReplacedText(reason) // as every audit row's
	var out storage.Suspect
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`); err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		mark, table, err := lockSuspectMark(ctx, tx)
		if err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		// Totals summed under another currency table are emptied, not moved under this one.
		if mark, err = emptyForeignTotals(ctx, tx, mark, table); err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		x, err := scanSuspect(tx.QueryRow(ctx, `SELECT `+suspectColumns+` FROM suspects WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("review suspect %d: %w", id, storage.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		if from != "" && x.State != from {
			out = x
			return fmt.Errorf("review suspect %d: %w: %s by %s, not %s", id, storage.ErrReviewedMeanwhile, x.State, x.ReviewedBy, from)
		}
		now := db.Now()
		if _, err := tx.Exec(ctx, `UPDATE suspects SET state = $1, reviewed_by = $2, reviewed_at = $3, reason = $4 WHERE id = $5`,
			state, actor, millis(now), reason, id); err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		if err := reviewSuspectTotals(ctx, tx, mark, x, state); err != nil {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		// The audit row names the flagged delivery's key, so that the audit log links to
		// its deliveries; "" once the delivery is swept.
		var key string
		if err := tx.QueryRow(ctx, `SELECT key FROM deliveries WHERE id = $1`, x.Delivery).Scan(&key); err != nil &&
			!errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("review suspect %d: %w", id, err)
		}
		action := "confirm double"
		if state == storage.SuspectDismissed {
			action = "dismiss suspect"
		}
		if err := db.insertAudit(ctx, tx, storage.AuditEntry{At: now, Actor: actor, Action: action, Source: x.Source, Key: key,
			Reason:        fmt.Sprintf("suspect %d (%s) on delivery %d: %s", x.ID, x.Kind, x.Delivery, reason),
			PreviousState: x.State}); err != nil {
			return err
		}
		x.State, x.ReviewedBy, x.ReviewedAt, x.Reason = state, actor, fromMillis(millis(now)), reason
		out = x
		return nil
	})
	if errors.Is(err, storage.ErrReviewedMeanwhile) {
		return out, err
	}
	if err != nil {
		return storage.Suspect{}, err
	}
	return out, nil
}
