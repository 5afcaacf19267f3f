package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// recordReq is one call of Record or RecordBatch: a writer takes it whole, so that all
// its deliveries land in one transaction and are answered together.
type recordReq struct {
	rows  []recordRow
	claim storage.ClaimOptions
	batch bool // RecordBatch: the rows are the items of one request
	// deadline is when the caller stops waiting for a writer to take r: its call's
	// time plus the busy timeout, or its context's deadline if earlier.
	deadline time.Time
	done     chan error
	// state says who has r: reqQueued until a writer takes it (to write it inside a
	// transaction of its own, or to answer it an error) or the caller gives up and
	// abandons it. Whoever moves it first decides; an abandoned r is never written.
	state atomic.Int32
}

// The states of a recordReq.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// recordRow is one delivery being recorded, with what its transaction decided, applied
// to the caller's delivery only once that transaction has committed.
type recordRow struct {
	// d is the delivery as it is stored: the caller's, or a copy of it with the
	// fields that a text column cannot hold escaped (storable).
	d       *storage.Delivery
	headers string
	claim   storage.ClaimOptions // its request's

	id, first, batch int64
	index            int // its place in a request of several events
	outcome          storage.Outcome
	mismatch         bool
	// bodyFrom is the delivery whose body this one's is, byte for byte: a duplicate
	// stores that reference instead of a copy (0: it stores its own body).
	bodyFrom      int64
	moneyMismatch bool
	suspects      []storage.SuspectKind

	out *storage.Delivery // the caller's, which the results go to
	// arrived is the delivery's receipt time as the clock gave it, before it was
	// stamped no earlier than the one stored before it (storage.ReceivedAfter): its
	// key is due downstream from then, not once the clock catches up with the stamp.
	arrived time.Time
	// sameBody is, for a row that lost its key's claim to a delivery stored before its
	// transaction, whether its body is that delivery's byte for byte.
	sameBody bool
}

// intake is the group commit of Record and RecordBatch. Concurrent calls of one process
// queue their requests; a writer takes all that are queued (up to maxBatchRows rows)
// and writes them in one transaction, so that a commit, and its WAL flush, serves many
// deliveries, and a few statements serve each transaction, however many rows it has.
type intake struct {
	reqs     chan *recordReq
	closing  chan struct{}
	done     chan struct{} // closed once the writers have returned
	stopOnce sync.Once
}

const (
	// maxBatchRows bounds the rows a writer takes into one transaction. A request is
	// taken whole, so a large RecordBatch may exceed it.
	maxBatchRows = 256
	// intakeWriters is how many transactions of intake one process has in flight at
	// once. One is enough: while it commits, the queue fills, and the next transaction
	// takes it all, in three round trips (recordTx). Two overlap one's round trips
	// with the other's commit, but split the queue into smaller batches, each paying
	// the server's cost of a transaction (planning, commit) for fewer deliveries, and
	// their batches wait on each other's locks whenever they share a key.
	intakeWriters = 1
)

// start starts the writers of db.
func (in *intake) start(db *DB) {
	in.reqs = make(chan *recordReq, 4*maxBatchRows)
	in.closing = make(chan struct{})
	in.done = make(chan struct{})
	var wg sync.WaitGroup
	for range intakeWriters {
		wg.Go(func() { (&batchWriter{db: db}).run(in) })
	}
	go func() {
		wg.Wait()
		close(in.done)
	}()
}

// stop lets the writers commit what is queued, and waits for them to return.
func (in *intake) stop() {
	in.stopOnce.Do(func() { close(in.closing) })
	<-in.done
}

// Record stores d and, unless d is a rejection, claims its key: the delivery is Accepted
// when it wins the claim (a new key, or one whose claim expired or was released) and a
// Duplicate of the claim's first delivery otherwise. Exactly one of any number of
// concurrent deliveries of a key wins, on whichever replica it arrives: the claim is an
// INSERT … ON CONFLICT … DO UPDATE … WHERE, which PostgreSQL serializes on the key's
// row. d.Status is stored as given. On success d's ID, Outcome, FirstDelivery,
// Mismatch and forensic flags are set, and the delivery and claim are committed; an
// error means nothing of d was stored.
//
// Concurrent calls share one transaction and one commit (group commit); each returns
// only after the commit that holds its rows. A transaction fails as a whole, but
// when it fails for one request's reason (a value the database refuses), each of its
// requests is written again alone, so that the others are stored all the same.
//
// Record waits at most the busy timeout (Options.BusyTimeout) from its call, or until
// ctx ends if sooner, for a writer to take d into a transaction: if none has by then,
// it returns an error wrapping ErrWriteTimeout (or ctx's error) and d is never
// written. Once d is taken, Record waits for that transaction's verdict, which comes
// within the busy timeout of the newest call it holds.
//
// A source or key that PostgreSQL text cannot hold (a NUL byte, bytes that are not
// UTF-8) is refused before anything is written; any other field that cannot be held
// as it is is stored escaped (see textSafe), and the body, bytea, as it is.
func (db *DB) Record(ctx context.Context, d *storage.Delivery, claim storage.ClaimOptions) error {
	return db.record(ctx, claim, false, d)
}

// RecordBatch stores the items of one request that carried several events, each as
// Record stores one, all in one transaction or none: on success every item's ID,
// Outcome, FirstDelivery and Mismatch are set, and Batch (the id of the first item's
// delivery) and BatchIndex (its place in items) are stored with it. Two items of one
// key: the first claims it, the second is its duplicate. Rejections cannot be
// recorded this way: a refused request is one rejected delivery (Record).
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
	called := time.Now()
	r := &recordReq{claim: claim, batch: batch, done: make(chan error, 1), rows: make([]recordRow, len(ds))}
	now := time.Time{}
	for i, d := range ds {
		if d.Outcome != storage.Rejected {
			if d.Key == "" {
				return fmt.Errorf("record delivery %d: empty key", i)
			}
			for _, p := range [...]string{claimKeyProblem("source", d.Source), claimKeyProblem("key", d.Key)} {
				if p != "" {
					return fmt.Errorf("record delivery %d: %s", i, p)
				}
			}
		}
		if d.ReceivedAt.IsZero() {
			if now.IsZero() {
				now = db.Now() // one time for all the items of a request
			}
			d.ReceivedAt = now
		}
		headers := "{}"
		if len(d.Headers) > 0 {
			// JSON text: a NUL in a header is escaped (\u0000), and bytes that are not
			// UTF-8 are replaced, so the column always holds it.
			headers = string(storage.AppendHeadersJSON(make([]byte, 0, 512), d.Headers))
		}
		r.rows[i] = recordRow{d: storable(d), headers: headers, claim: claim, out: d}
	}
	r.deadline = called.Add(db.busyTimeout)
	wait := time.NewTimer(time.Until(r.deadline))
	if dl, ok := ctx.Deadline(); ok && dl.Before(r.deadline) {
		r.deadline = dl // ctx.Done tells the caller; the writer goes by r.deadline
	}
	defer wait.Stop()
	in := &db.intake
	select {
	case in.reqs <- r:
	case <-in.closing:
		return fmt.Errorf("record delivery: %w", storage.ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("record delivery: %w", context.Cause(ctx))
	case <-wait.C:
		return fmt.Errorf("record delivery: %w", storage.ErrWriteTimeout)
	}
	// Queued, r is written only if a writer takes it before the caller gives up; once
	// taken, wait for its verdict so that the answer never claims more than what was
	// committed.
	var err error
	select {
	case err = <-r.done:
	case <-wait.C:
		err = r.abandon(fmt.Errorf("record delivery: %w", storage.ErrWriteTimeout))
	case <-ctx.Done():
		err = r.abandon(fmt.Errorf("record delivery: %w", context.Cause(ctx)))
	case <-in.done:
		// Closed while r was queued, after the writers' last look at the queue.
		err = r.abandon(fmt.Errorf("record delivery: %w", storage.ErrClosed))
	}
	if err != nil {
		return err
	}
	for i := range r.rows {
		row := &r.rows[i]
		d := row.out
		d.ID, d.Outcome, d.FirstDelivery, d.Mismatch = row.id, row.outcome, row.first, row.mismatch
		d.Batch, d.BatchIndex = row.batch, row.index
		d.MoneyMismatch, d.Suspects = row.moneyMismatch, row.suspects
	}
	return nil
}

// abandon gives r up, unless a writer took it first: then it waits for the writer's
// verdict and returns that instead of why.
func (r *recordReq) abandon(why error) error {
	if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
		return why
	}
	return <-r.done
}

// batchWriter is one writer: its goroutine takes the queued requests, a batch at a
// time, and commits them. Its buffers serve batch after batch.
type batchWriter struct {
	db    *DB
	batch []*recordReq
	rows  []*recordRow
	claimBuffers
}

// run commits batches of what is queued until intake closes, then what was queued
// before it closed.
func (w *batchWriter) run(in *intake) {
	closing := false
	for {
		var first *recordReq
		if !closing {
			select {
			case first = <-in.reqs:
			case <-in.closing:
				closing = true
			}
		}
		if closing {
			select {
			case first = <-in.reqs:
			default:
				return
			}
		}
		// A writer takes what is already queued without waiting for more: under load
		// the queue fills while the previous batch commits, and when idle a lone
		// delivery commits at once.
		w.batch = append(w.batch[:0], first)
		rows := len(first.rows)
	fill:
		for rows < maxBatchRows {
			select {
			case r := <-in.reqs:
				w.batch = append(w.batch, r)
				rows += len(r.rows)
			default:
				break fill
			}
		}
		w.commit(w.batch)
		clear(w.batch) // drop the requests: their callers own them again
	}
}

// commit writes batch in one transaction and answers each request it took. If that
// fails for a reason of one request's, each request is written again in a
// transaction of its own, so that one bad request cannot fail the others. A failure of
// the whole database (unreachable, read-only, full, too slow) fails them all at once:
// retrying one by one would only make each wait again.
func (w *batchWriter) commit(batch []*recordReq) {
	live, err := w.commitTx(batch)
	if err != nil && len(live) > 1 && !databaseWide(err) {
		// Rolled back: until a transaction of its own takes it, each caller may stop
		// waiting again.
		for _, r := range live {
			r.state.Store(reqQueued)
		}
		for _, r := range live {
			one, err := w.commitTx([]*recordReq{r})
			if len(one) == 1 {
				r.done <- err
			}
		}
		return
	}
	for _, r := range live {
		r.done <- err
	}
}

// take moves to reqTaken each request of batch that its caller has not abandoned, and
// returns those whose deadline has not passed, in order. The late ones are answered
// ErrWriteTimeout at once and never written: their callers are about to give up.
func take(batch []*recordReq, now time.Time) []*recordReq {
	var live []*recordReq
	for _, r := range batch {
		if !r.state.CompareAndSwap(reqQueued, reqTaken) {
			continue
		}
		if !now.Before(r.deadline) {
			r.done <- fmt.Errorf("record delivery: %w", storage.ErrWriteTimeout)
			continue
		}
		live = append(live, r)
	}
	return live
}
