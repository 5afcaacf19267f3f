package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookdedup/hookdedup/storage"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// recordReq is one call of Record or RecordBatch: the writer takes it whole, so that
// all its deliveries land in one transaction and are answered together.
type recordReq struct {
	rows  []recordRow
	claim storage.ClaimOptions
	batch bool          // RecordBatch: the rows are the items of one request
	keys  []preparedKey // the rows' forensic keys (forensicPrep.keys)
	done  chan error
	// state says who has r: reqQueued until the writer takes it (to write it inside a
	// transaction that holds the lock, or to answer it an error) or Record gives up
	// waiting and abandons it. Whoever moves it first decides; an abandoned r is never
	// read again, for its Delivery may be reused as soon as Record returns.
	state atomic.Int32
}

// recordRow is one delivery of a recordReq.
type recordRow struct {
	d       *storage.Delivery
	headers string
	claim   storage.ClaimOptions // its request's

	// results, applied to d only once the transaction that holds them has committed
	id, first, batch int64
	outcome          storage.Outcome
	mismatch         bool
	// bodyFrom is the delivery whose body this one's is, byte for byte: a duplicate
	// stores that reference instead of a copy (0: it stores its own body).
	bodyFrom int64
	// byClaim: an accepted delivery that its claim names as the transaction commits,
	// found by its key through the claim and left out of the index of keys until the
	// claim lets go of it (migration 0022).
	byClaim       bool
	moneyMismatch bool
	suspects      []storage.SuspectKind
	// prep is what the forensic checks need of the delivery alone: none for a
	// rejection.
	prep forensicPrep
	// arrived is the delivery's receipt time as the clock gave it, before it was
	// stamped no earlier than the one stored before it (storage.ReceivedAfter): its
	// key is due downstream from then, not once the clock catches up with the stamp.
	arrived time.Time
}

// The states of a recordReq.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// maxPooledRows bounds the rows a pooled request keeps room for: a rare large batch
// must not pin its slice in every pooled request.
const maxPooledRows = 64

// maxPooledKeys bounds the forensic keys a pooled request keeps room for, as
// maxPooledRows its rows: a business key and a few correlation rules a row.
const maxPooledKeys = 4 * maxPooledRows

// recordReqs recycles requests and their channels: intake makes one per request.
var recordReqs = sync.Pool{New: func() any { return &recordReq{done: make(chan error, 1)} }}

// Record stores d and, unless d is a rejection, claims its key: the delivery is Accepted
// when it wins the claim (no row, an expired row or a released row for its source and
// key) and Duplicate otherwise. On success d.ID, d.Outcome, d.FirstDelivery and
// d.Mismatch are set, and the delivery and claim are committed. d.Status is stored as
// given: it is the status the caller will answer, which is the caller's to decide. Concurrent calls share
// one transaction and one fsync (group commit); each returns only after the commit that
// holds its rows. An error means nothing of d was stored where it will be found: nothing
// at all, or (ErrFileGone) a commit into a database file that left its path meanwhile.
//
// Record waits at most the busy timeout (Options.BusyTimeout) from its call, whatever
// else waits on the database (another process's lock, the write connection's other
// users, earlier batches): if d was not yet being written by then, it returns
// ErrWriteTimeout and d is never written. Once d's transaction holds the lock, Record
// waits for its commit, a matter of milliseconds.
func (db *DB) Record(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error {
	return db.record(ctx, claim, false, d)
}

// RecordBatch stores the items of one request that carried several events, each as a
// delivery of its own with its own key, claimed in order, as Record does one. All of
// them commit in one transaction, or none: on success every item's ID, Outcome,
// FirstDelivery and Mismatch are set, and Batch (the id of the first item's delivery)
// and BatchIndex (its place in items) are stored with it; on error nothing of any item
// was stored where it will be found. Two items of one key: the first claims it, the
// second is its duplicate. Rejections cannot be recorded this way: a refused request
// is one rejected delivery (Record).
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
	r := recordReqs.Get().(*recordReq)
	r.claim, r.batch = claim, batch
	now := time.Time{}
	for i, d := range ds {
		if d.Outcome != storage.Rejected && d.Key == "" {
			recordReqs.Put(r.reset())
			return fmt.Errorf("record delivery %d: empty key", i)
		}
		if d.ReceivedAt.IsZero() {
			if now.IsZero() {
				now = db.Now() // one time for all the items of a request
			}
			d.ReceivedAt = now
		}
		headers := "{}"
		if len(d.Headers) > 0 {
			headers = string(storage.AppendHeadersJSON(make([]byte, 0, 512), d.Headers))
		}
		r.rows = append(r.rows, recordRow{d: d, headers: headers, claim: claim})
		if d.Outcome != storage.Rejected {
			r.keys = r.rows[len(r.rows)-1].prep.prepare(d, claim, r.keys)
		}
	}
	wait := time.NewTimer(db.busyTimeout)
	defer wait.Stop()
	select {
	case db.reqs <- r:
	case <-db.closing:
		recordReqs.Put(r.reset())
		return storage.ErrClosed
	case <-ctx.Done():
		recordReqs.Put(r.reset())
		return ctx.Err()
	case <-wait.C:
		recordReqs.Put(r.reset())
		return fmt.Errorf("record delivery: %w", storage.ErrWriteTimeout)
	}
	// Queued, r is written only if the writer takes it before the wait ends; once taken,
	// wait for its verdict so that the answer never claims more than what was committed.
	var err error
	select {
	case err = <-r.done:
	case <-wait.C:
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			// The writer will drop r unread; it is not recycled, as the writer may still
			// hold it in a batch.
			return fmt.Errorf("record delivery: %w", storage.ErrWriteTimeout)
		}
		err = <-r.done
	}
	if err == nil {
		for _, row := range r.rows {
			d := row.d
			d.ID, d.Outcome, d.FirstDelivery, d.Mismatch = row.id, row.outcome, row.first, row.mismatch
			d.Batch = row.batch
			d.MoneyMismatch, d.Suspects = row.moneyMismatch, row.suspects
		}
	}
	// The writer let go of r when it answered on r.done.
	recordReqs.Put(r.reset())
	return err
}

// reset makes r ready for reuse and returns it.
func (r *recordReq) reset() *recordReq {
	clear(r.rows)
	r.rows = r.rows[:0]
	clear(r.keys)
	r.keys = r.keys[:0]
	if cap(r.rows) > maxPooledRows {
		r.rows = nil
	}
	if cap(r.keys) > maxPooledKeys {
		r.keys = nil
	}
	r.claim, r.batch = storage.ClaimOptions{}, false
	r.state.Store(reqQueued)
	return r
}

// writer is the single goroutine that commits intake writes. It takes what is already
// queued (up to maxBatch), once the goroutines ready to run have run, without waiting
// for more: under load the queue fills while the previous batch commits, and when idle
// a lone delivery commits at once.
func (db *DB) writer() {
	defer close(db.writerDone)
	w := &batchWriter{db: db}
	defer w.close()
	batch := make([]*recordReq, 0, db.maxBatch)
	batches := 0
	busy := false // the last batch held several requests
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
		// Let the handlers that are ready to run queue their deliveries before the batch
		// is cut: on a busy server the commit that just ended woke a whole batch of
		// them, and others have parsed a request meanwhile, but the writer would run
		// first and cut a batch of the few already queued. One yield to them made
		// batches a third larger (31 to 43 deliveries with 64 callers) and cost a
		// delivery a quarter less CPU: fewer fsyncs, fewer WAL frames of the same pages.
		// Only after a batch of several: a server that is not busy yields nothing, so a
		// lone delivery never waits for the console's or a sweep's work to pause.
		if busy {
			runtime.Gosched()
		}
		batch = append(batch[:0], first)
		rows := len(first.rows)
	fill:
		// A request is taken whole however many rows it has; others join it while the
		// transaction stays within maxBatch rows.
		for len(batch) < db.maxBatch && rows < db.maxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
				rows += len(r.rows)
			default:
				break fill
			}
		}
		w.commit(batch)
		busy = len(batch) > 1
		db.batches.Add(1)
		db.batchRows.Add(int64(rows))
		clear(batch) // drop the requests: their callers recycle them
		if db.walRestart.CompareAndSwap(true, false) {
			db.finishCheckpoint()
		}
		if batches++; batches%db.checkEvery == 0 {
			db.growWriterCache()
		}
	}
}

const (
	// Takes ?1 delivery ids from the sequence and returns the last id issued before
	// them. Inside the batch's IMMEDIATE transaction no other writer can insert, so the
	// batch numbers its deliveries itself from there: each claim names its first
	// delivery as it is made, and the claims' answers can say which request won by that
	// number. The sequence never goes back, so an id is never issued twice, not even
	// once the deliveries holding the newest ids are swept (a claim may still name
	// one). It also steps over any delivery stored without it (max(id) is one seek to
	// the table's last page), so that such a row cannot make a batch fail.
	sqlTakeDeliveryIDs = `UPDATE delivery_seq SET last = max(last, (SELECT coalesce(max(id), 0) FROM deliveries)) + ?1
WHERE only = 1 RETURNING last - ?1`

	// The claims of a chunk of requests, in order: a new row, or a takeover of an
	// expired or released one; a live claim refuses. It returns the first_delivery of
	// every row it wrote, that is the delivery id of each request that won. A takeover
	// keeps the old claim's leased_until, and a next_attempt_at equal to it would read
	// as a hand-off cut off (storage.NotALease): one that falls due at that very
	// millisecond is moved by one.
	sqlClaimHead = `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at, next_attempt_at)
VALUES `
	sqlClaimRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlClaimTail = `
ON CONFLICT (source, key) DO UPDATE SET
	state = excluded.state, first_delivery = excluded.first_delivery, payload_hash = excluded.payload_hash,
	claimed_at = excluded.claimed_at, expires_at = excluded.expires_at,
	updated_at = excluded.updated_at,
	next_attempt_at = CASE WHEN excluded.next_attempt_at = claims.leased_until
		THEN excluded.next_attempt_at + 1 ELSE excluded.next_attempt_at END,
	attempts = 0, last_error = '', ttl = NULL
WHERE (claims.expires_at <= excluded.claimed_at AND claims.state != 'processing') OR claims.state = 'released'
RETURNING first_delivery`

	// Who holds the keys that a chunk's duplicates lost to, one answer per duplicate (its
	// delivery id first), and whether the duplicate's body is the first delivery's byte
	// for byte, under the same source, key and booking: a redelivery, whose body is then
	// stored as a reference to that one (body_from), and which the indexes of keys and
	// bookings find through it (migration 0020). The first delivery's row is read for
	// that comparison only; a first delivery that stores no body of its own is never
	// referred to.
	sqlHolderHead = `SELECT v.column1, c.first_delivery, c.payload_hash,
	coalesce(f.body = v.column4 AND f.source = v.column2 AND f.key = v.column3 AND f.booking = v.column5, 0)
FROM (VALUES `
	sqlHolderRow  = `(?, ?, ?, ?, ?)`
	sqlHolderTail = `) AS v
JOIN claims AS c ON c.source = v.column2 AND c.key = v.column3
LEFT JOIN deliveries AS f ON f.id = c.first_delivery AND f.body_from = 0`

	sqlDeliveryHead = `
INSERT INTO deliveries (` + deliveryInsertColumns + `)
VALUES `
	sqlDeliveryRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlDeliveryTail = ``
)

// chunkSizes are the numbers of rows the writer's statements take at once, largest
// first: a batch is cut into chunks of these sizes (its binary digits, so a batch of up
// to 255 takes at most eight), and a few prepared statements serve every batch size.
var chunkSizes = [...]int{128, 64, 32, 16, 8, 4, 2, 1}

// stmtKind is one of the writer's multi-row statements.
type stmtKind int

const (
	kindClaim stmtKind = iota
	kindHolder
	kindDelivery
	nKinds
)

func (k stmtKind) sql(rows int) string {
	head, row, tail := sqlClaimHead, sqlClaimRow, sqlClaimTail
	switch k {
	case kindHolder:
		head, row, tail = sqlHolderHead, sqlHolderRow, sqlHolderTail
	case kindDelivery:
		head, row, tail = sqlDeliveryHead, sqlDeliveryRow, sqlDeliveryTail
	}
	return rowsSQL(head, row, tail, rows)
}

// rowsSQL is a statement of head, rows copies of row separated by commas, and tail: the
// shape of every multi-row statement the writer and the forensic checks prepare.
func rowsSQL(head, row, tail string, rows int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}

// bySize is a multi-row statement for each chunk size, in chunkSizes' order.
type bySize [len(chunkSizes)]string

// sizedSQL is the statement that sql makes for each chunk size.
func sizedSQL(sql func(rows int) string) (s bySize) {
	for i, size := range chunkSizes {
		s[i] = sql(size)
	}
	return s
}

// of is the statement for n rows. A size that has none is an error: run by its text,
// an empty statement would do nothing and say nothing.
func (s *bySize) of(n int) (string, error) {
	for i, size := range chunkSizes {
		if size == n {
			return s[i], nil
		}
	}
	return "", fmt.Errorf("no statement for %d rows", n)
}

// writerSQL holds the writer's multi-row statements, by kind.
var writerSQL = func() (q [nKinds]bySize) {
	for k := range nKinds {
		q[k] = sizedSQL(k.sql)
	}
	return q
}()

// batchWriter is the writer goroutine's state. Each of its statements takes many rows:
// a batch costs a few statements, not two or three per delivery. That matters beyond
// SQLite's own work: a goroutine that spends long in a cgo call gives up its P, and
// getting one back queues it behind every runnable handler; the writer must not queue
// once per delivery.
//
// A batch's transaction runs on the write connection itself (a sql.Conn, BEGIN and
// COMMIT its own statements), not in a sql.Tx: database/sql starts a goroutine and a
// cancelable context for every query in a Tx, to close its rows if the Tx ends first,
// which cost each of the batch's dozen statements as much again as SQLite's own work.
// The statements stay prepared in the connection's statement cache (the write DSN's
// _stmt_cache_size), found by their text.
type batchWriter struct {
	db   *DB
	args []any
	won  map[int64]bool
	// winner is the row of the transaction that last won each key's claim.
	winner map[claimKey]*recordRow
	rows   []*recordRow // the rows of the transaction's requests, in order (ids from rows[0].id up)
	ask    []*recordRow
	fx     forensics
	// lastStamp is the latest receipt time the writer stamped (stampRead: known).
	lastStamp time.Time
	stampRead bool
}

func (w *batchWriter) close() { w.fx.close() }

// commit writes batch in one transaction and answers each request it took (see take). If
// that fails for a reason of one request's, each request is retried in a transaction of
// its own, so that one bad request cannot fail the others. A failure of the whole
// database (locked, full, read-only, its file gone) fails them all at once: retrying one
// by one would make the k-th wait busy_timeout k+1 times.
//
// After each commit the database file is looked for at its path (checkFile): a delivery
// committed into a file that has just been removed or replaced is answered as not
// stored, never as stored. That stat is the check's whole cost, once per batch.
func (w *batchWriter) commit(batch []*recordReq) {
	live, err := w.commitTx(batch)
	if err != nil && len(live) > 1 && !databaseWide(err) {
		// Rolled back: until its own transaction holds the lock, each caller may stop
		// waiting again.
		for _, r := range live {
			r.state.Store(reqQueued)
		}
		for _, r := range live {
			one, err := w.commitTx([]*recordReq{r})
			if len(one) == 0 {
				continue // abandoned meanwhile
			}
			if err == nil {
				err = w.db.checkFile()
			}
			r.done <- err
		}
		return
	}
	if err == nil && len(live) > 0 {
		err = w.db.checkFile()
	}
	for _, r := range live {
		r.done <- err
	}
}

// take moves to reqTaken each request of batch that Record has not abandoned, and
// returns those, in order, in batch's array. The writer takes a request only to write
// it in a transaction that holds the lock already, or to answer it an error; the
// abandoned ones it drops unread.
func take(batch []*recordReq) []*recordReq {
	out := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			out = append(out, r)
		}
	}
	return out
}

// chunks calls f with consecutive chunks of reqs, each of a size in chunkSizes.
func chunks[T any](reqs []T, f func(chunk []T) error) error {
	for len(reqs) > 0 {
		n := chunkSizes[len(chunkSizes)-1]
		for _, size := range chunkSizes {
			if size <= len(reqs) {
				n = size
				break
			}
		}
		if err := f(reqs[:n]); err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}

// beforeBegin, when set (tests set it), runs just before the writer begins a batch's
// transaction: where another process's commit is the hardest to see.
var beforeBegin func()

// commitTx writes in one transaction the requests of batch that it takes, and returns
// those: once the transaction holds the lock, every one that Record has not abandoned
// while it waited; if none could begin, every one still waiting, to be answered the
// error. It returns no error if it took none.
func (w *batchWriter) commitTx(batch []*recordReq) ([]*recordReq, error) {
	ctx := context.Background()
	if err := w.db.fileGone(); err != nil {
		return take(batch), err
	}
	w.fx.prepare(w.db)
	conn, err := w.db.write.Conn(ctx)
	if err != nil {
		return take(batch), fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	if beforeBegin != nil {
		beforeBegin()
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return take(batch), fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			rollback(conn)
			w.fx.rolledBack()
		}
	}()
	if batch = take(batch); len(batch) == 0 {
		return nil, nil
	}
	if err := w.fx.current(ctx, conn); err != nil {
		return batch, err
	}
	// Number the deliveries, request by request, and gather the rows that claim a key,
	// in order.
	w.rows, w.ask = w.rows[:0], w.ask[:0]
	for _, r := range batch {
		for i := range r.rows {
			w.rows = append(w.rows, &r.rows[i])
		}
	}
	var last int64
	if err := conn.QueryRowContext(ctx, sqlTakeDeliveryIDs, len(w.rows)).Scan(&last); err != nil {
		return batch, fmt.Errorf("take delivery ids: %w", err)
	}
	// Receipt times follow ids (storage.ReceivedAfter), from the last one this writer
	// stamped, or, at its first transaction, the last one stored: read once, not at
	// every commit.
	if !w.stampRead {
		var stamped int64
		if err := conn.QueryRowContext(ctx, `SELECT received_at FROM deliveries ORDER BY id DESC LIMIT 1`).Scan(&stamped); err != nil &&
			!errors.Is(err, sql.ErrNoRows) {
			return batch, fmt.Errorf("last receipt time: %w", err)
		}
		w.lastStamp, w.stampRead = fromMillis(stamped), true
	}
	next := last
	for _, r := range batch {
		var batchID int64
		if r.batch {
			batchID = next + 1 // the first item's id names the request's items
		}
		for i := range r.rows {
			row := &r.rows[i]
			next++
			if row.arrived.IsZero() { // not again when the transaction runs again
				row.arrived = row.d.ReceivedAt
			}
			row.d.ReceivedAt = storage.ReceivedAfter(row.d.ReceivedAt, w.lastStamp)
			if row.d.ReceivedAt.After(w.lastStamp) {
				w.lastStamp = row.d.ReceivedAt
			}
			row.id, row.outcome, row.first, row.mismatch, row.batch = next, row.d.Outcome, 0, false, batchID
			row.bodyFrom, row.byClaim = 0, false
			row.moneyMismatch, row.suspects = false, nil
			if row.d.Outcome != storage.Rejected {
				w.ask = append(w.ask, row)
			}
		}
	}
	err = w.fx.before(ctx, conn, w.ask)
	if err == nil {
		err = w.claimRows(ctx, conn)
	}
	if err == nil {
		err = chunks(w.rows, func(chunk []*recordRow) error {
			st, err := writerSQL[kindDelivery].of(len(chunk))
			if err != nil {
				return fmt.Errorf("insert deliveries: %w", err)
			}
			args := w.args[:0]
			for _, r := range chunk {
				d := r.d
				index := 0
				if r.batch != 0 {
					index = int(r.id - r.batch) // the request's rows have consecutive ids
				}
				body := d.Body
				if r.bodyFrom != 0 {
					body = nil // NULL: the body is delivery bodyFrom's
				}
				args = append(args, r.id, d.Source, millis(d.ReceivedAt), string(r.outcome), d.Status, d.Error,
					d.Key, d.KeyMethod, d.KeyFrom, d.KeyCanonical, d.PayloadHash, r.mismatch, r.first,
					d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency, d.RemoteAddr, d.ContentType,
					r.batch, index, r.headers, d.BatchEnvelope, body, r.bodyFrom, r.byClaim)
			}
			w.args = args
			// Query, not Exec: go-sqlite3 binds a query's arguments and runs its first
			// step in one cgo call, where Exec crosses once per argument (27 a row).
			rows, err := conn.QueryContext(ctx, st, args...)
			if err != nil {
				return fmt.Errorf("insert deliveries: %w", err)
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("insert deliveries: %w", err)
			}
			return nil
		})
	}
	if err == nil {
		err = w.fx.after(ctx, conn, w.rows)
	}
	clear(w.args)
	clear(w.rows)
	clear(w.ask)
	w.rows, w.ask = w.rows[:0], w.ask[:0]
	if err != nil {
		return batch, err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return batch, fmt.Errorf("commit: %w", err) // rolled back: SQLite may leave it open
	}
	committed = true
	w.db.totals.add(batch)
	w.db.noteCommit()
	return batch, nil
}

// claimRows claims the keys of w.ask, in order, and sets each row's outcome, first
// delivery and mismatch. Rows of one key in one transaction (concurrent deliveries, or
// two items of one request) are claimed in order: the first wins, the rest are its
// duplicates.
func (w *batchWriter) claimRows(ctx context.Context, conn *sql.Conn) error {
	if len(w.ask) == 0 {
		return nil
	}
	if w.won == nil {
		w.won = make(map[int64]bool)
		w.winner = make(map[claimKey]*recordRow)
	}
	clear(w.won)
	clear(w.winner)
	defer clear(w.winner)
	err := chunks(w.ask, func(chunk []*recordRow) error {
		st, err := writerSQL[kindClaim].of(len(chunk))
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		args := w.args[:0]
		for _, r := range chunk {
			d := r.d
			state, next := storage.StateProcessed, sql.NullInt64{}
			if r.claim.Dispatch {
				state, next = storage.StateProcessing, nullMillis(r.arrived)
			}
			at := millis(d.ReceivedAt)
			args = append(args, d.Source, d.Key, state, r.id, d.PayloadHash, at, at+r.claim.TTL.Milliseconds(), at, next)
		}
		w.args = args
		rows, err := conn.QueryContext(ctx, st, args...)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			w.won[id] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The losers: a live claim holds their keys (perhaps won earlier in this batch).
	lost := w.ask[:0]
	for _, r := range w.ask {
		if w.won[r.id] {
			r.outcome, r.first = storage.Accepted, r.id
			// A key claimed again later in the same transaction (its claim expired at
			// once) names the later row; the earlier one, whose row the claim's triggers
			// could not reach (it is not written yet), goes in the index of keys.
			k := claimKey{r.d.Source, r.d.Key}
			if prev := w.winner[k]; prev != nil {
				prev.byClaim = false
			}
			w.winner[k] = r
			r.byClaim = true
		} else {
			r.outcome = storage.Duplicate
			lost = append(lost, r)
		}
	}
	base := w.rows[0].id // the transaction's rows have consecutive ids from here
	err = chunks(lost, func(chunk []*recordRow) error {
		st, err := writerSQL[kindHolder].of(len(chunk))
		if err != nil {
			return fmt.Errorf("read holders: %w", err)
		}
		args := w.args[:0]
		for _, r := range chunk {
			args = append(args, r.id, r.d.Source, r.d.Key, r.d.Body, r.d.Booking)
		}
		w.args = args
		rows, err := conn.QueryContext(ctx, st, args...)
		if err != nil {
			return fmt.Errorf("read holders: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, first int64
			var hash string
			var same bool
			if err := rows.Scan(&id, &first, &hash, &same); err != nil {
				return fmt.Errorf("read holders: %w", err)
			}
			if id < base || id-base >= int64(len(w.rows)) {
				return fmt.Errorf("read holders: delivery %d is not in the transaction", id)
			}
			r := w.rows[id-base]
			r.first, r.mismatch = first, hash != r.d.PayloadHash
			if first >= base && first-base < int64(len(w.rows)) {
				// Won in this transaction: its row is not written yet, its body is at hand.
				f := w.rows[first-base].d
				same = bytes.Equal(f.Body, r.d.Body) && f.Source == r.d.Source && f.Key == r.d.Key && f.Booking == r.d.Booking
			}
			if same && !r.mismatch && len(r.d.Body) > 0 {
				r.bodyFrom = first
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, r := range lost {
		if r.first == 0 {
			return fmt.Errorf("claim %s/%s: refused, but no claim holds it", r.d.Source, r.d.Key)
		}
	}
	w.ask = w.ask[:0]
	return nil
}

// rollback ends the transaction open on conn, if one is. A connection whose
// transaction stays open is closed rather than given back to the pool, where the next
// write would run inside it.
func rollback(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err == nil {
		return
	}
	// SQLite ends the transaction itself on some errors, and ROLLBACK then fails.
	conn.Raw(func(dc any) error {
		if c, ok := dc.(*sqlite3.SQLiteConn); ok && c.AutoCommit() {
			return nil
		}
		return driver.ErrBadConn
	})
}

// claimKey is a claim's source and key.
type claimKey struct{ source, key string }

// databaseWide reports whether err is the database's rather than one request's.
func databaseWide(err error) bool {
	if errors.Is(err, storage.ErrFileGone) {
		return true
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrReadonly,
		sqlite3.ErrCantOpen, sqlite3.ErrCorrupt, sqlite3.ErrPerm, sqlite3.ErrNotADB:
		return true
	}
	return false
}
