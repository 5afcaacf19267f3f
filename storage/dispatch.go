package storage

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf16"
)

// DispatcherForgetAfter is how long the record of a dispatcher not seen since is kept
// (Store.DispatcherSeen). A dispatcher's sources count as forwarded by no one half a
// minute after it was last seen; its record is kept well past that, and no longer: a
// forwarder restarting in a loop leaves a record under a new id at every start, and
// every lease of a record-only source reads them all.
const DispatcherForgetAfter = 10 * time.Minute

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
	// BatchEnvelope is the stored delivery's (Delivery.BatchEnvelope, its first
	// item's when it keeps none of its own): "" when its request carried one event.
	BatchEnvelope string

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

// AttemptInterrupted is the error of an attempt whose lease ran out before its outcome
// was recorded: the process was killed, or stalled, or could not write, mid-attempt.
// It is recorded when the key is leased again, released or reprocessed, with the
// lease's end as its StartedAt, so that a key's history counts every hand-off the
// downstream may have received. If the attempt's process was only stalled and records
// its outcome after all, that outcome takes the interrupted one's place. It does not count towards max_attempts (a process
// killed again and again must not fail a key) nor towards a failing streak (the
// downstream did not fail).
const AttemptInterrupted = "interrupted: the lease ran out before an outcome was recorded (the process stopped or stalled mid-attempt); the downstream may have received it"

// AttemptResult says what follows an attempt.
type AttemptResult struct {
	Done bool // the downstream took it: processed
	// Unsent: Done without a hand-off (a key of a source without forward_url): not
	// counted as an attempt, so that retention does not keep its payload as one owed to
	// a downstream that never had it.
	Unsent bool
	// Listed: the attempt is in the key's history already, recorded against the lease it
	// ran under, which a newer lease of the same job took over mid-attempt; the record
	// against the newer lease only moves the key on.
	Listed    bool
	Failed    bool      // the last allowed attempt failed: failed
	NextAt    time.Time // otherwise: when to try again
	LastError string
}

// AttemptsCounted is what an attempt with result r adds to its key's count of attempts:
// 1, or 0 for a settlement without a hand-off (Unsent).
func AttemptsCounted(r AttemptResult) int {
	if r.Unsent {
		return 0
	}
	return 1
}

// BatchEnvelopeHeaderMax is the longest envelope, as BatchEnvelopeHeader writes it, that
// the dispatcher sends in a header. Past it the header is left out and its size sent
// instead: a field line near 8 KiB is refused by nginx's and Apache's defaults (the
// name counts), and the downstream's other headers need room under Node's 16 KiB.
const BatchEnvelopeHeaderMax = 4 << 10

// BatchEnvelopeHandOff is the header that a hand-off of an item with envelope carries:
// X-Hookdedup-Batch-Envelope with the envelope (BatchEnvelopeHeader), or, past
// BatchEnvelopeHeaderMax, only its size in X-Hookdedup-Batch-Envelope-Omitted, so that
// the downstream knows there is one to fetch rather than take a request that proxies
// would refuse. No envelope (an item stored before envelopes were kept), no header: name
// is "".
func BatchEnvelopeHandOff(envelope string) (name, value string) {
	if envelope == "" {
		return "", ""
	}
	v := BatchEnvelopeHeader(envelope)
	if len(v) > BatchEnvelopeHeaderMax {
		return "X-Hookdedup-Batch-Envelope-Omitted", strconv.Itoa(len(v)) + " bytes"
	}
	return "X-Hookdedup-Batch-Envelope", v
}

// EnvelopeText is a batch envelope as BatchEnvelopes reads it: its size in bytes, and
// its text, "" when it is over the size asked for.
type EnvelopeText struct {
	Size int
	Text string
}

// BatchEnvelopeHeader is envelope as the X-Hookdedup-Batch-Envelope header carries it:
// plain ASCII, each other character escaped as JSON does (\uXXXX, a surrogate pair past
// U+FFFF), so that the header is the same JSON and no proxy or client has to guess an
// encoding. A valid envelope has such characters only inside its strings, where the
// escape means the same. Control characters and DEL, which no header may carry raw,
// are escaped too, and bytes that are not UTF-8 become \ufffd.
func BatchEnvelopeHeader(envelope string) string {
	plain := true
	for i := 0; i < len(envelope) && plain; i++ {
		plain = envelope[i] >= 0x20 && envelope[i] < 0x7f
	}
	if plain {
		return envelope
	}
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(envelope)+len(envelope)/2)
	esc := func(r rune) {
		b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	for _, r := range envelope {
		switch {
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			esc(r1)
			esc(r2)
		default:
			esc(r) // range gives U+FFFD for a byte that is not UTF-8
		}
	}
	return string(b)
}

// DistinctSources is sources without repeats, in their order, nil for nil: the
// engines' LeaseDue read the keys of each source they are given once, so that a source
// named twice neither records a key's interrupted hand-off twice nor counts its keys
// twice against the limit.
func DistinctSources(sources []string) []string {
	if sources == nil {
		return nil
	}
	out := make([]string, 0, len(sources))
	for _, s := range sources {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
