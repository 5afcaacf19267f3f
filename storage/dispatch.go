package storage

import (
	"time"
)

// Job is an accepted event due downstream, leased to one dispatcher.
type Job struct {
	ClaimID     int64
	Source, Key string
	Delivery    int64 // the delivery whose payload is sent
	// Stored is false when the delivery is no longer stored: there is no payload to
	// send, and ContentType and Body are empty.
	Stored bool
	// DeliverySource and DeliveryKey are the stored delivery's own source and key. They
	// are the job's own unless the claim names a delivery of another key, which the
	// dispatcher must never send under this one's Idempotency-Key.
	DeliverySource, DeliveryKey string
	ContentType                 string
	Body                        []byte
	// Batch is the stored delivery's batch (the id of the first item delivery of the
	// request it came in), 0 when that request carried one event; BatchIndex is its
	// place in that request.
	Batch      int64
	BatchIndex int
	Attempts   int       // attempts made before this one
	Generation time.Time // the claim's claimed_at: a re-claimed key is another job
	// Updated is the claim's updated_at when the job was leased: a reprocess sets it, so
	// that an attempt begun before the reprocess cannot settle the key the reprocess
	// queued again.
	Updated time.Time
	// Lease is when the job's lease ends. Each lease of a key ends after the one before
	// it, so it also names this lease: an attempt that outlived it (a stalled process, a
	// slow disk) cannot move the key on once another dispatcher has leased it since.
	Lease time.Time
}

// Attempt is one hand-off attempt downstream.
type Attempt struct {
	ID          int64
	Source, Key string
	Delivery    int64
	StartedAt   time.Time
	Duration    time.Duration
	Status      int    // HTTP status; 0 when none came back
	Error       string // what went wrong; "" on success
	Response    string // a bounded excerpt of the answer
}

// AttemptResult says what follows an attempt.
type AttemptResult struct {
	Done      bool      // the downstream took it: processed
	Failed    bool      // the last allowed attempt failed: failed
	NextAt    time.Time // otherwise: when to try again
	LastError string
}
