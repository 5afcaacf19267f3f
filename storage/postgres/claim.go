package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookdedup/hookdedup/storage"
)

// sqlIndexPlans keeps the planner of the transaction's statements to index look-ups:
// no scan of a whole table, and no hash or merge join, which would read the joined
// table whole. The statements that join an array of keys to a table are each a few
// index look-ups a key, and PostgreSQL plans each once for any arrays (a generic plan,
// cached by the connection) after its first few runs. One made while a table was
// small (an empty database, filling) would otherwise scan it whole, and keep doing so
// for every batch as the table grows, until an ANALYZE happened to replace it; planning
// each statement anew for each transaction avoids that too, but costs the server more
// than the statements themselves. A bitmap scan is kept off too: of a small table, the
// planner reads every row of a key through one, and sorts them, where the index gives
// them in order for a LIMIT to stop at the first. The settings end with the
// transaction.
const sqlIndexPlans = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('enable_bitmapscan', 'off', true)`

// The statements of a writer's transaction. Each takes all the rows of its kind at once,
// as arrays (unnest), so that a transaction costs the same few round trips whatever
// its size, and each is one prepared statement whatever the number of rows.
const (
	// Takes $1 delivery ids from the sequence, in ascending order. Other replicas take
	// ids meanwhile, so a transaction's ids need not be consecutive.
	sqlTakeDeliveryIDs = `SELECT nextval('delivery_ids') FROM generate_series(1, $1::int) ORDER BY 1`

	// The claims of one round (claimRows), one row per key, in the arrays' order: a
	// new row, or a takeover of an expired or released one; a live claim refuses. It
	// returns the first_delivery of every row it wrote, that is the id of each row that
	// won. Its conflict check locks each existing row, won or not, until the
	// transaction ends. A takeover keeps the old claim's leased_until, and a
	// next_attempt_at equal to it would read as a hand-off cut off
	// (storage.NotALease): one that falls due at that very millisecond is moved by one.
	sqlClaim = `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at, next_attempt_at)
SELECT v.source, v.key, v.state, v.first, v.hash, v.at, v.expires, v.at, v.next
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[])
	AS v(source, key, state, first, hash, at, expires, next)
ON CONFLICT (source, key) DO UPDATE SET
	state = excluded.state, first_delivery = excluded.first_delivery, payload_hash = excluded.payload_hash,
	claimed_at = excluded.claimed_at, expires_at = excluded.expires_at,
	updated_at = excluded.updated_at,
	next_attempt_at = CASE WHEN excluded.next_attempt_at = claims.leased_until
		THEN excluded.next_attempt_at + 1 ELSE excluded.next_attempt_at END,
	attempts = 0, last_error = '', ttl = NULL
WHERE (claims.expires_at <= excluded.claimed_at AND claims.state <> 'processing') OR claims.state = 'released'
RETURNING first_delivery`

	// Who holds the keys that rows lost to, one answer per row ($1 its place), and
	// whether the row's body is the first delivery's byte for byte: a redelivery, whose
	// body is then stored as a reference to that one (body_from). The first delivery
	// is read for that comparison only; one that stores no body of its own is never
	// referred to. The holder's state and expiry say whether a later row of the key
	// in the same transaction would take the claim over.
	sqlHolders = `
SELECT v.i, c.first_delivery, c.payload_hash, c.state, c.expires_at, coalesce(f.body = v.body, false)
FROM unnest($1::int[], $2::text[], $3::text[], $4::bytea[]) AS v(i, source, key, body)
JOIN claims AS c ON c.source = v.source AND c.key = v.key
LEFT JOIN deliveries AS f ON f.id = c.first_delivery AND f.body_from = 0`

	sqlInsertDeliveries = `INSERT INTO deliveries (` + deliveryInsertColumns + `)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::text[], $7::text[],
	$8::text[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::bigint[], $14::text[], $15::text[],
	$16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::bigint[], $22::int[], $23::text[],
	$24::text[], $25::bytea[], $26::bigint[])`
)

// commitTx writes in one transaction the requests of batch that it takes, and returns
// those. It takes them once it has a connection to begin the transaction on (the
// begin rides with the transaction's first statements): every one that its caller has
// not abandoned and whose deadline has not passed (take); if none could have one,
// every one still waiting, to be answered the error. The transaction may take until the
// latest deadline of the requests. One that PostgreSQL aborted for a serialization
// failure or a deadlock is run again, as writeTx runs one; so is one whose connection
// was lost, or could not be had, before its commit was sent (the server restarted, a
// failover, a pooled connection the server had ended), until that deadline: nothing of
// it was stored. One lost once the commit was sent may have been stored, and fails.
// It returns no error if it took none.
func (w *batchWriter) commitTx(batch []*recordReq) ([]*recordReq, error) {
	var deadline time.Time
	for _, r := range batch {
		if r.state.Load() == reqQueued && r.deadline.After(deadline) {
			deadline = r.deadline
		}
	}
	if deadline.IsZero() {
		return nil, nil // all abandoned
	}
	ctx, cancel := context.WithDeadlineCause(context.Background(), deadline, storage.ErrWriteTimeout)
	defer cancel()
	aborts := 0
	for attempt := 1; ; attempt++ {
		conn, err := w.db.pool.Acquire(ctx)
		live := take(batch, time.Now())
		if len(live) == 0 {
			if err == nil {
				conn.Release()
			}
			return nil, nil
		}
		sent := false
		w.alone = false
		if err != nil {
			err = fmt.Errorf("begin: %w", err)
		} else {
			sent, err = w.recordTx(ctx, conn.Conn(), live)
			if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
				// Still in the transaction, aborted or not: roll it back. A connection
				// that cannot is left in one, and the pool closes it on release.
				rctx, cancel := rollbackContext(ctx)
				conn.Exec(rctx, "rollback")
				cancel()
			}
			conn.Release()
		}
		if err != nil && !sent && readOnlyServer(err) {
			w.db.leaveReadOnly()
		}
		switch {
		case err == nil:
			return live, nil
		case ctx.Err() != nil:
			return live, timedOut(ctx, err)
		case !sent && connectionLost(err):
			// Nothing of it was stored: tried again until the deadline.
		case !sent && w.alone && lockTimedOut(err):
			// It ran alone, and waited for a lock past aloneLockWait while every
			// other replica's intake waited for it: again, under the keys' locks.
			w.contendedUntil = time.Now().Add(aloneRetry)
		case !retryable(err):
			return live, err
		default:
			if aborts++; aborts == maxAttempts {
				return live, err
			}
		}
		// Rolled back: until the next attempt takes them again, each caller may stop
		// waiting, and one whose deadline passes meanwhile is answered then, not when
		// the last of its batch's deadlines ends the attempts.
		for _, r := range live {
			r.state.Store(reqQueued)
		}
		// Back off a little, more each time, so that two replicas that deadlocked do not
		// meet again at once, and a server starting again is not hammered.
		select {
		case <-time.After(time.Duration(min(attempt*attempt, 250)) * time.Millisecond):
		case <-ctx.Done():
			return take(batch, time.Now()), timedOut(ctx, err)
		}
	}
}

// timedOut is err, wrapped in ErrWriteTimeout when ctx's deadline is why it failed.
func timedOut(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), storage.ErrWriteTimeout) {
		return fmt.Errorf("%w: %w", storage.ErrWriteTimeout, err)
	}
	return err
}

// databaseWide reports whether err is the database's rather than one request's: the
// database unreachable, refusing writes, out of resources, too slow, or contended past
// the retries. A request's own are the values a column or a constraint refuses (class
// 22, 23) and the limits a value exceeds (54: a key too long for its index), and the
// errors of the engine's own checks.
func databaseWide(err error) bool {
	if errors.Is(err, storage.ErrWriteTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || pgconn.Timeout(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "22", "23", "54":
			return false
		}
		return true
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce)
}

// recordTx writes reqs in a transaction of its own on conn and commits it: it takes
// their rows' ids, claims their keys, runs the forensic checks and inserts the
// deliveries. Statements that need no answer of one another are sent together, in one
// round trip (a pipeline): the transaction costs three (begin, the ids, the traces and
// the forensic look-ups; the claims and their holders; the deliveries, their flags and
// the commit), however many rows it holds, unless a claim must wait for another round
// (claimRows). It may run again from the start when PostgreSQL aborts the transaction
// (commitTx), so it resets every result first. On error the transaction may still be
// open: the caller rolls it back. sent reports whether the commit was sent: before,
// nothing was stored.
func (w *batchWriter) recordTx(ctx context.Context, conn *pgx.Conn, reqs []*recordReq) (sent bool, err error) {
	rows := w.rows[:0]
	ask := w.ask[:0] // the rows that claim a key, in order
	for _, r := range reqs {
		for i := range r.rows {
			row := &r.rows[i]
			rows = append(rows, row)
			if row.d.Outcome != storage.Rejected {
				ask = append(ask, row)
			}
		}
	}
	w.rows, w.ask = rows, ask
	defer clear(w.rows)
	defer clear(w.ask)
	// Receipt times follow ids (storage.ReceivedAfter), from the last one this writer
	// stamped, or, at its first transaction, the last one stored. Before any statement
	// reads them.
	if !w.stampRead {
		var stamped int64
		if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT received_at FROM deliveries ORDER BY id DESC LIMIT 1), 0)`).Scan(&stamped); err != nil {
			return false, fmt.Errorf("last receipt time: %w", err)
		}
		w.lastStamp, w.stampRead = fromMillis(stamped), true
	}
	for _, row := range rows {
		if row.arrived.IsZero() { // not again when the transaction runs again
			row.arrived = row.d.ReceivedAt
		}
		if at := storage.ReceivedAfter(row.d.ReceivedAt, w.lastStamp); !at.Equal(row.d.ReceivedAt) {
			row.d.ReceivedAt, row.out.ReceivedAt = at, at
		}
		if row.d.ReceivedAt.After(w.lastStamp) {
			w.lastStamp = row.d.ReceivedAt
		}
	}
	// The forensic checks (forensics.go) ride in the same transaction: the claims
	// that rows take over leave their traces before the claims overwrite them, the
	// business and correlation keys are looked up under their locks before the claims,
	// and the flags are committed with their deliveries.
	var b pgx.Batch
	b.Queue("begin isolation level read committed") // as writeTx (beginSQL), whatever the server's default
	b.Queue(sqlIndexPlans)
	look := &w.look
	defer look.release()
	try := time.Now().After(w.contendedUntil)
	locked, all := queueClaimKeyLocks(&b, w.db.locks, ask, look.collect(w.db.locks, ask), try)
	traced := queueTraceTakenOver(&b, ask)
	look.queue(&b, !all)
	// The ids last, under every lock: of two replicas' rows that share a business or
	// correlation key, the one that took the key's lock first takes the smaller id,
	// which the look-ups read as the first delivery of the key.
	b.Queue(sqlTakeDeliveryIDs, len(rows))
	br := conn.SendBatch(ctx, &b)
	for range 2 { // begin, index plans
		if _, err := br.Exec(); err != nil {
			return false, closeBatch(br, fmt.Errorf("begin: %w", err))
		}
	}
	if locked {
		// The other two columns are there to take the keys' locks and set the
		// lock_timeout: nothing of them is read.
		if err := br.QueryRow().Scan(&w.alone, nil, nil); err != nil {
			return false, closeBatch(br, fmt.Errorf("lock keys: %w", err))
		}
		// One that runs alone because it must (all) is no lone writer's: a lock
		// timeout there is the server's, database's or role's, and fails it.
		w.alone = w.alone && !all
		if try && !w.alone && !all {
			// The try failed: another intake transaction is in flight. Only a try
			// pushes the next one on; a transaction that did not try found nothing.
			w.contendedUntil = time.Now().Add(aloneRetry)
		}
	}
	if traced {
		if _, err := br.Exec(); err != nil {
			return false, closeBatch(br, fmt.Errorf("trace expired claims taken over: %w", err))
		}
	}
	if err := look.read(br); err != nil {
		return false, closeBatch(br, err)
	}
	res, err := br.Query()
	if err == nil {
		w.ids, err = pgx.AppendRows(w.ids[:0], res, pgx.RowTo[int64])
	}
	if err != nil {
		return false, closeBatch(br, fmt.Errorf("take delivery ids: %w", err))
	}
	if err := br.Close(); err != nil {
		return false, err
	}
	ids := w.ids
	if len(ids) != len(rows) {
		return false, fmt.Errorf("take delivery ids: %d for %d deliveries", len(ids), len(rows))
	}
	// Number the deliveries, request by request.
	next := 0
	for _, r := range reqs {
		first := ids[next]
		for i := range r.rows {
			row := &r.rows[i]
			row.id, row.outcome, row.first, row.mismatch, row.bodyFrom = ids[next], row.d.Outcome, 0, false, 0
			row.moneyMismatch, row.suspects, row.batch, row.index = false, nil, 0, 0
			next++
			if r.batch {
				// A request's items need not have consecutive ids: each keeps its place.
				row.batch, row.index = first, i
			}
		}
	}
	if err := w.claimRows(ctx, conn, ask); err != nil {
		return false, err
	}
	// The claims decided, the checks decide the flags, and which rows
	// business_key_blocks makes duplicates, before the rows are written: one round
	// trip inserts them, writes the flags and commits.
	look.decide(rows)
	b = pgx.Batch{}
	w.queueInsertDeliveries(&b, rows)
	look.queueWrites(&b)
	b.Queue("commit")
	br = conn.SendBatch(ctx, &b)
	defer clear(w.deliveryCols.body)
	if _, err := br.Exec(); err != nil {
		return committing(err), closeBatch(br, fmt.Errorf("insert deliveries: %w", err))
	}
	if err := look.readWrites(br, rows); err != nil {
		return committing(err), closeBatch(br, err)
	}
	if err := commit(br.Exec()); err != nil {
		return true, closeBatch(br, err)
	}
	// Committed: what comes after the commit's answer cannot undo it. A server that
	// ends the connection as it commits (a restart, an administrator) says so right
	// after that answer, and the deliveries are stored all the same. The connection,
	// unusable, is closed, and the pool drops it.
	if err := br.Close(); err != nil {
		cctx, cancel := rollbackContext(ctx)
		conn.Close(cctx)
		cancel()
	}
	return true, nil
}

// maxClaimKeyLocks bounds the key locks of one transaction, of its claim keys and its
// forensic keys together: the server's lock table, shared by every transaction, holds
// a few thousand (max_locks_per_transaction × max_connections, 6,400 as PostgreSQL
// ships), and a few replicas each recording a request of a thousand items with a
// business key and correlations would fill it.
const maxClaimKeyLocks = 4 * maxBatchRows

// sqlClaimKeyLocks takes the locks of claimKeyLock for the lock ids $2 ($1: that
// lock's half), one after the other in the array's order, after intakeLock ($4):
// exclusive when $3; else, when $5, exclusive if no other intake transaction holds it
// (pg_try_advisory_xact_lock), and then none of the keys' locks; else shared. It
// answers whether the transaction holds intakeLock exclusively, and says so to the
// transaction's later statements in the setting sqlAloneSetting (sqlForensicKeyLocks).
// The subquery that takes intakeLock is kept apart by its OFFSET, so that it runs once,
// before the keys' locks.
//
// The shared lock is waited for with lock_timeout lifted, and the server's, the
// database's or the role's put back right after (set_config of NULL: the connection's
// default, which the engine never changes on its connections): a transaction
// running alone holds it for as long as it runs, and the wait is for another replica's
// intake, bounded by the deliveries' deadlines, not for a lock an operator may hold.
// Under such a bound the waiting replica's deliveries would fail with 55P03.
//
// A transaction that ran alone by choice ($5) waits for a lock (a claim's row, which a
// replica's dispatch, release or bulk action may hold a moment) aloneLockWait at most
// (lock_timeout): meanwhile every other replica's intake waits for it. Past that it
// fails, and runs again under the keys' locks (recordTx).
const sqlClaimKeyLocks = `SELECT set_config('` + sqlAloneSetting + `', a.alone::text, true)::boolean,
	(SELECT count(*) FROM (SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k WHERE NOT a.alone) AS l),
	CASE WHEN a.alone AND NOT $3::boolean THEN set_config('lock_timeout', $6::text, true) END
FROM (SELECT CASE WHEN $3::boolean THEN (SELECT true FROM (SELECT pg_advisory_xact_lock($4::bigint)) AS x)
	WHEN $5::boolean AND pg_try_advisory_xact_lock($4::bigint) THEN true
	ELSE (SELECT false FROM (SELECT set_config('lock_timeout', '0', true), pg_advisory_xact_lock_shared($4::bigint),
		set_config('lock_timeout', NULL, true)) AS x) END AS alone OFFSET 0) AS a`

// sqlAloneSetting is the setting, local to its transaction, by which sqlClaimKeyLocks
// tells the statements after it that the transaction holds intakeLock exclusively.
const sqlAloneSetting = "hookdedup.intake_alone"

// aloneRetry is how long a writer whose transaction found another intake
// transaction in flight (another replica's), or waited past aloneLockWait, takes
// the keys' locks before it tries again to run alone: while replicas take
// deliveries at once, trying would only make one of them wait for the other's
// whole transaction now and then. A variable, which tests shorten.
var aloneRetry = time.Minute

// aloneLockWait bounds each lock wait of a transaction that runs alone by choice
// (sqlClaimKeyLocks).
const aloneLockWait = 100 * time.Millisecond

// queueClaimKeyLocks queues on b the statement that takes the locks of the keys of ask
// (claimKeyLock), ahead of every statement that locks a claim. A transaction's row
// locks follow an order of their own: the trace of expired claims locks processed
// claims first, then the claim statement every key, in key order, and a claim
// committed by a third transaction in between is locked early by one transaction
// and late by another. Two transactions could then each hold a row the other waits
// for, until PostgreSQL's deadlock check (a second) aborted one. Holding every key's
// lock first, taken in one global order, no transaction waits for a row of another's
// key while holding one. It reports whether it queued it (ask has no key otherwise),
// and whether it took the intake-wide lock exclusively instead of the keys' locks: when
// they and the transaction's forensic key locks (forensic of them) would be more than
// maxClaimKeyLocks. Every intake transaction holds that lock, shared or not, so such a
// transaction runs alone and needs no lock of a key. The locks are those of space.
//
// With try, a transaction that need not run alone runs alone all the same when no
// other intake transaction is in flight, as with one replica (intakeWriters is one a
// process): one lock instead of one a key, and for forensics two or three a delivery
// (sqlClaimKeyLocks answers which it took).
func queueClaimKeyLocks(b *pgx.Batch, space lockSpace, ask []*recordRow, forensic int, try bool) (queued, all bool) {
	if len(ask) == 0 {
		return false, false
	}
	ids := make([]int32, 0, len(ask))
	for _, r := range ask {
		id := space.key(forensicKeyLockID("claim", r.d.Source, r.d.Key))
		if id == 0 {
			id = 1 // 0 stands for the lock of all keys
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	all = len(ids)+forensic > maxClaimKeyLocks
	if all {
		ids = ids[:0]
	}
	b.Queue(sqlClaimKeyLocks, int32(claimKeyLock&0xffffffff), ids, all, space.id(intakeLock), try && !all,
		strconv.FormatInt(aloneLockWait.Milliseconds(), 10))
	return true, all
}

// commit is the verdict of a COMMIT that returned tag and err: PostgreSQL answers
// ROLLBACK to the commit of a transaction that had failed.
func commit(tag pgconn.CommandTag, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("commit: %w", err)
	case tag.String() == "ROLLBACK":
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// committing reports whether the commit that follows, in the last round trip, a
// statement that failed with err may have run. Not when the server answered that
// statement with an error (an ERROR aborts the transaction, and a FATAL, as when an
// administrator or a restart ends the connection, ends the session before it reads
// the commit), nor when pgx never sent the round trip (it prepares the statements a
// connection has not prepared yet first, and failed there): nothing of the
// transaction was stored, and it may run again. A connection that broke without an
// answer may have run it.
func committing(err error) bool {
	var pe *pgconn.PgError
	var unsent pgx.ErrPreprocessingBatch
	return !errors.As(err, &pe) && !errors.As(err, &unsent)
}

// closeBatch closes br after err, its first error, and returns err.
func closeBatch(br pgx.BatchResults, err error) error {
	br.Close()
	return err
}

// claimBuffers are a writer's buffers for the statements of its transactions, reused
// batch after batch.
type claimBuffers struct {
	// lastStamp is the latest receipt time the writer stored (stampRead: known).
	lastStamp time.Time
	stampRead bool
	// contendedUntil is when the writer next tries to run a transaction alone
	// (queueClaimKeyLocks): until then another replica's intake runs beside it.
	contendedUntil time.Time
	// alone is whether the writer's transaction runs alone by choice
	// (sqlClaimKeyLocks), under aloneLockWait.
	alone        bool
	ids          []int64
	ask          []*recordRow
	holders      map[claimKey]*holder
	claimCols    claimArrays
	holderCols   holderArrays
	read         []holderRead
	deliveryCols deliveryArrays
	look         forensicLookups
}

// claimKey names a claim.
type claimKey struct{ source, key string }

func keyOf(r *recordRow) claimKey { return claimKey{r.d.Source, r.d.Key} }

// holder is a key's claim as the transaction leaves it so far.
type holder struct {
	first   int64
	hash    string
	state   string
	expires int64
	row     *recordRow // the row of the transaction that holds it, if one does
	// round is the row of the key that the current round claims, and lost whether it
	// lost: the rows of the key are then read with their holder (sqlHolders).
	round *recordRow
	lost  bool
}

// takesOver reports whether r, claimed now, would take h over, by sqlClaim's WHERE.
func (h *holder) takesOver(r *recordRow) bool {
	return (h.expires <= millis(r.d.ReceivedAt) && h.state != storage.StateProcessing) || h.state == storage.StateReleased
}

// claimRows claims the keys of ask and sets each row's outcome, first delivery,
// mismatch and body reference, as if the rows were claimed one by one in order: of the
// rows of one key, the first wins, or loses to the claim that holds the key, and each
// later one is the duplicate of whichever delivery then holds it.
//
// A multi-row INSERT … ON CONFLICT cannot touch one row twice, so the rows are claimed
// in rounds: each round claims the first pending row of every key, in one statement,
// and the later rows of a key are answered from what the round left. Only a row that
// would take its key over from an earlier one, which needs the claim to expire between
// two deliveries of one transaction, waits for another round, with the later rows of
// its key. Each round claims its keys sorted by source and key, byte for byte, under
// the keys' locks, taken first (queueClaimKeyLocks): two replicas' transactions that
// share keys wait for each other there, never in a cycle.
func (w *batchWriter) claimRows(ctx context.Context, conn *pgx.Conn, ask []*recordRow) error {
	if len(ask) == 0 {
		return nil
	}
	if w.holders == nil {
		w.holders = make(map[claimKey]*holder)
	}
	defer clear(w.holders)
	pending := ask
	for len(pending) > 0 {
		// This round: the first pending row of each key.
		var round []*recordRow
		for _, r := range pending {
			h := w.holders[keyOf(r)]
			if h == nil {
				h = &holder{}
				w.holders[keyOf(r)] = h
			}
			if h.round == nil {
				h.round, h.lost = r, false
				round = append(round, r)
			}
		}
		slices.SortFunc(round, func(a, b *recordRow) int {
			return cmp.Or(cmp.Compare(a.d.Source, b.d.Source), cmp.Compare(a.d.Key, b.d.Key))
		})
		won, err := w.claimRound(ctx, conn, round, pending)
		if err != nil {
			return err
		}
		for i, r := range round {
			h := w.holders[keyOf(r)]
			if !won[i] {
				h.lost = true
				continue
			}
			r.outcome, r.first = storage.Accepted, r.id
			h.first, h.hash, h.row = r.id, r.d.PayloadHash, r
			h.state, h.expires = storage.StateProcessed, millis(r.d.ReceivedAt)+r.claim.TTL.Milliseconds()
			if r.claim.Dispatch {
				h.state = storage.StateProcessing
			}
		}
		// The rows of the keys whose round lost, the loser and the later ones: each
		// needs the holder, and its body compared with the holder's first delivery's.
		if err := w.setHolders(pending, ask); err != nil {
			return err
		}
		// Answer the pending rows in order. One that would take its key over waits for
		// the next round, with the later rows of its key.
		var next []*recordRow
		for _, r := range pending {
			h := w.holders[keyOf(r)]
			if h.round == r && !h.lost {
				continue // won its round
			}
			if h.round == nil || (h.round != r && h.takesOver(r)) {
				h.round = nil // the next round's is r
				next = append(next, r)
				continue
			}
			r.outcome, r.first, r.mismatch = storage.Duplicate, h.first, h.hash != r.d.PayloadHash
			same := r.sameBody
			if h.row != nil {
				// Won in this transaction: its row is not written yet, its body is at hand.
				same = bytes.Equal(h.row.d.Body, r.d.Body)
			}
			if same && !r.mismatch && len(r.d.Body) > 0 {
				r.bodyFrom = r.first
			}
		}
		for _, r := range pending {
			if h := w.holders[keyOf(r)]; h.round != nil {
				h.round = nil // done with this round
			}
		}
		pending = next
	}
	return nil
}

// claimArrays are the arrays of sqlClaim.
type claimArrays struct {
	source, key, state, hash []string
	first, at, expires       []int64
	next                     []*int64
}

// claimRound claims the keys of round, one row each, in round's order, and says which
// rows won. In the same round trip it reads the holders of the keys of pending, the
// rows still to answer (sqlHolders, into w.read): setHolders needs those of the keys
// that lost, and which those are is known only from the claim's answer. The read
// comes after the claim, in the same transaction, as a statement of its own: it sees
// the claims that the claim statement waited for and locked.
func (w *batchWriter) claimRound(ctx context.Context, conn *pgx.Conn, round, pending []*recordRow) ([]bool, error) {
	c := &w.claimCols
	c.source, c.key, c.state, c.hash = c.source[:0], c.key[:0], c.state[:0], c.hash[:0]
	c.first, c.at, c.expires, c.next = c.first[:0], c.at[:0], c.expires[:0], c.next[:0]
	for _, r := range round {
		d := r.d
		state, next := storage.StateProcessed, (*int64)(nil)
		if r.claim.Dispatch {
			state, next = storage.StateProcessing, nullMillis(r.arrived)
		}
		at := millis(d.ReceivedAt)
		c.source, c.key, c.state, c.hash = append(c.source, d.Source), append(c.key, d.Key), append(c.state, state), append(c.hash, d.PayloadHash)
		c.first, c.at, c.expires = append(c.first, r.id), append(c.at, at), append(c.expires, at+r.claim.TTL.Milliseconds())
		c.next = append(c.next, next)
	}
	h := &w.holderCols
	h.i, h.source, h.key, h.body = h.i[:0], h.source[:0], h.key[:0], h.body[:0]
	for i, r := range pending {
		h.i, h.source, h.key, h.body = append(h.i, int32(i)), append(h.source, r.d.Source), append(h.key, r.d.Key), append(h.body, r.d.Body)
	}
	defer clear(h.body)
	var b pgx.Batch
	b.Queue(sqlClaim, c.source, c.key, c.state, c.first, c.hash, c.at, c.expires, c.next)
	b.Queue(sqlHolders, h.i, h.source, h.key, h.body)
	br := conn.SendBatch(ctx, &b)
	res, err := br.Query()
	var ids []int64
	if err == nil {
		ids, err = pgx.CollectRows(res, pgx.RowTo[int64])
	}
	if err != nil {
		return nil, closeBatch(br, fmt.Errorf("claim: %w", err))
	}
	if err := w.readHolders(br, len(pending)); err != nil {
		return nil, closeBatch(br, fmt.Errorf("read holders: %w", err))
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	place := make(map[int64]int, len(round))
	for i, id := range c.first {
		place[id] = i
	}
	won := make([]bool, len(round))
	for _, id := range ids {
		i, ok := place[id]
		if !ok {
			return nil, fmt.Errorf("claim: won by delivery %d, which is not in the transaction", id)
		}
		won[i] = true
	}
	return won, nil
}

// holderArrays are the arrays of sqlHolders.
type holderArrays struct {
	i           []int32
	source, key []string
	body        [][]byte
}

// holderRead is what sqlHolders read of one row's key: its claim, and whether the row's
// body is the claim's first delivery's.
type holderRead struct {
	found bool
	h     holder
	same  bool
}

// readHolders reads the answer of sqlHolders for n rows into w.read, by the rows' place.
func (w *batchWriter) readHolders(br pgx.BatchResults, n int) error {
	w.read = append(w.read[:0], make([]holderRead, n)...)
	res, err := br.Query()
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var i int32
		var hr holderRead
		if err := res.Scan(&i, &hr.h.first, &hr.h.hash, &hr.h.state, &hr.h.expires, &hr.same); err != nil {
			return err
		}
		if i < 0 || int(i) >= n {
			return fmt.Errorf("row %d of %d", i, n)
		}
		hr.found = true
		w.read[i] = hr
	}
	return res.Err()
}

// setHolders sets the holder of each key of pending that lost its claim this round,
// from what claimRound read (w.read, by place in pending), and each of its rows'
// sameBody. ask are the transaction's rows that claim a key: a holder may be one of
// them.
func (w *batchWriter) setHolders(pending, ask []*recordRow) error {
	lost, found := 0, 0
	for i, r := range pending {
		k := w.holders[keyOf(r)]
		if !k.lost {
			continue
		}
		lost++
		hr := w.read[i]
		if !hr.found {
			continue
		}
		found++
		r.sameBody = hr.same
		h := hr.h
		k.first, k.hash, k.state, k.expires, k.row = h.first, h.hash, h.state, h.expires, nil
		if h.first >= ask[0].id {
			// Perhaps won earlier in this transaction, whose ids are ask[0].id's and up.
			for _, o := range ask {
				if o.id == h.first {
					k.row = o
				}
			}
		}
	}
	if found != lost {
		// The claim statement locked every row it lost to: none can have gone since.
		return fmt.Errorf("read holders: %d claims refused, %d holders found", lost, found)
	}
	return nil
}

// deliveryArrays are the arrays of sqlInsertDeliveries, in deliveryInsertColumns'
// order.
type deliveryArrays struct {
	id, received, first, batch, bodyFrom []int64
	status, index                        []int32
	mismatch                             []bool
	source, outcome, errText, key, keyMethod, keyFrom, keyCanonical, hash,
	property, booking, eventStatus, amount, currency, remoteAddr, contentType, headers, envelope []string
	body [][]byte
}

// queueInsertDeliveries queues on b the statement that inserts rows. The bodies stay
// in w.deliveryCols until b is sent: the caller clears them then.
func (w *batchWriter) queueInsertDeliveries(b *pgx.Batch, rows []*recordRow) {
	c := &w.deliveryCols
	*c = deliveryArrays{
		id: c.id[:0], received: c.received[:0], first: c.first[:0], batch: c.batch[:0], bodyFrom: c.bodyFrom[:0],
		status: c.status[:0], index: c.index[:0], mismatch: c.mismatch[:0],
		source: c.source[:0], outcome: c.outcome[:0], errText: c.errText[:0], key: c.key[:0],
		keyMethod: c.keyMethod[:0], keyFrom: c.keyFrom[:0], keyCanonical: c.keyCanonical[:0], hash: c.hash[:0],
		property: c.property[:0], booking: c.booking[:0], eventStatus: c.eventStatus[:0], amount: c.amount[:0],
		currency: c.currency[:0], remoteAddr: c.remoteAddr[:0], contentType: c.contentType[:0],
		headers: c.headers[:0], envelope: c.envelope[:0], body: c.body[:0],
	}
	for _, r := range rows {
		d := r.d
		body := d.Body
		if r.bodyFrom != 0 {
			body = nil // NULL: the body is delivery bodyFrom's
		}
		c.id, c.source, c.received = append(c.id, r.id), append(c.source, d.Source), append(c.received, millis(d.ReceivedAt))
		c.outcome, c.status, c.errText = append(c.outcome, string(r.outcome)), append(c.status, int32(d.Status)), append(c.errText, d.Error)
		c.key, c.keyMethod, c.keyFrom = append(c.key, d.Key), append(c.keyMethod, d.KeyMethod), append(c.keyFrom, d.KeyFrom)
		c.keyCanonical, c.hash = append(c.keyCanonical, d.KeyCanonical), append(c.hash, d.PayloadHash)
		c.mismatch, c.first = append(c.mismatch, r.mismatch), append(c.first, r.first)
		c.property, c.booking, c.eventStatus = append(c.property, d.Property), append(c.booking, d.Booking), append(c.eventStatus, d.EventStatus)
		c.amount, c.currency = append(c.amount, d.Amount), append(c.currency, d.Currency)
		c.remoteAddr, c.contentType = append(c.remoteAddr, d.RemoteAddr), append(c.contentType, d.ContentType)
		c.batch, c.index = append(c.batch, r.batch), append(c.index, int32(r.index))
		c.headers, c.envelope = append(c.headers, r.headers), append(c.envelope, d.BatchEnvelope)
		c.body, c.bodyFrom = append(c.body, body), append(c.bodyFrom, r.bodyFrom)
	}
	b.Queue(sqlInsertDeliveries, c.id, c.source, c.received, c.outcome, c.status, c.errText,
		c.key, c.keyMethod, c.keyFrom, c.keyCanonical, c.hash, c.mismatch, c.first, c.property, c.booking,
		c.eventStatus, c.amount, c.currency, c.remoteAddr, c.contentType, c.batch, c.index, c.headers,
		c.envelope, c.body, c.bodyFrom)
}
