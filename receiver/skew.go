package receiver

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// verify checks src's signature on a delivery. For a timestamped scheme it also records
// how far the signed time is from the time of receipt, whenever the signature matched:
// also for a delivery refused for being outside the tolerance, which is what a machine
// whose clock drifts sees of every delivery, but not for one signed in milliseconds.
func (rc *Receiver) verify(src *Source, r *http.Request, body []byte) error {
	now := rc.now()
	tv, ok := src.Verifier.(signature.TimestampVerifier)
	if !ok {
		return queryUnread(r, src.Verifier.Verify(r.Header, requestQuery(r), body, now))
	}
	signed, err := tv.VerifyTimestamp(r.Header, requestQuery(r), body, now)
	// A time in milliseconds is the sender's slip, which its refusal names, not a
	// clock's drift: counted, it would have this machine's clock blamed.
	if !signed.IsZero() && !signature.InMilliseconds(signed.Unix()) {
		skew := signed.Sub(now)
		rc.metrics.SignatureSkew.WithLabelValues(src.Name).Observe(skew.Seconds())
		rc.skew.observe(src.Name, signed, body, skew, now)
	}
	return queryUnread(r, err)
}

// queryUnread adds to err, a verifier's missing query parameter, why the query did not
// give it when it could not be decoded: url.Values leaves out every pair that does not
// decode, so "?token=…;x=1", which Go refuses to split at the semicolon, reads as no
// token at all.
func queryUnread(r *http.Request, err error) error {
	if !errors.Is(err, signature.ErrMissingQueryParameter) {
		return err
	}
	if _, qerr := url.ParseQuery(r.URL.RawQuery); qerr != nil {
		return fmt.Errorf("%w (the query string could not be decoded: %s)", err, queryProblem(qerr))
	}
	return err
}

// queryProblem says what url.ParseQuery found wrong with a query, without quoting it:
// its escape error quotes the bytes after a '%', which may be a mistyped token's, and
// the answer and the log would carry them.
func queryProblem(err error) string {
	if _, ok := errors.AsType[url.EscapeError](err); ok {
		return "a % not followed by two hex digits"
	}
	return err.Error() // a semicolon separator: it quotes nothing
}

// requestQuery is r's query for a verifier, nil when the URL has none: most deliveries
// carry no query, and parsing nothing still allocates a map per request. Verifiers
// only read it, and reading a nil url.Values finds nothing, as an empty one does.
func requestQuery(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	return r.URL.Query()
}

// ClockSkew returns the median of signed time minus time of receipt over the
// authentic deliveries of timestamped schemes in the last hour (positive: the senders'
// clocks are ahead of this machine's), and how many deliveries that is; 0, 0 when there
// were none. A signed message counts once however often it arrives: a replay of a
// captured delivery is refused as too old, but its signature matches. A median of
// minutes, whichever the sender, says this machine's clock is off: the deliveries more
// than a source's tolerance off are refused. Every delivery counts alike, whatever its
// source: a source's few deliveries in time cannot hide the others' showing this
// clock off, at the price that many different captured deliveries, replayed, can move
// the median as much as a clock that is off would.
func (rc *Receiver) ClockSkew() (median time.Duration, n int) {
	return rc.skew.median(rc.now())
}

// skewSamples bounds what one minute keeps of its skews: a sample, taken uniformly
// (reservoir sampling), whatever the traffic.
const skewSamples = 32

// skewRemembered is how many signed messages the window remembers having counted, so
// that a replay of one counts no more: far more than a replayer's captured deliveries,
// and few enough to hold in memory whatever the traffic.
const skewRemembered = 4096

// maxSkew bounds a recorded skew, so that absurd timestamps cannot overflow the sums
// of a median; it is far beyond any tolerance.
const maxSkew = 24 * time.Hour

// skewWindow keeps the skews of the last hour in memory: one slot per minute, each
// with how many were seen in it and a bounded sample of them; and the signed messages
// counted lately. The zero value is ready.
type skewWindow struct {
	mu      sync.Mutex
	minutes [60]skewMinute
	seen    map[uint64]struct{} // the last skewRemembered messages counted, by hash
	order   [skewRemembered]uint64
	next    int // where order takes the next one, past the oldest
}

// skewSeed seeds the hashes by which skewWindow knows the signed messages it counted.
var skewSeed = maphash.MakeSeed()

type skewMinute struct {
	minute  int64 // unix minute the slot holds
	n       int   // skews seen in it
	samples [skewSamples]time.Duration
}

// observe counts skew, the skew of a signed message (its source, signed time and body)
// received at now, unless that message was counted already.
func (w *skewWindow) observe(source string, signed time.Time, body []byte, skew time.Duration, now time.Time) {
	skew = min(max(skew, -maxSkew), maxSkew)
	m := now.Unix() / 60
	// The message's hash before the lock, which every signed delivery takes.
	var h maphash.Hash
	h.SetSeed(skewSeed)
	h.WriteString(source)
	h.WriteByte(0)
	maphash.WriteComparable(&h, signed.UnixNano())
	h.Write(body)
	id := h.Sum64()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = make(map[uint64]struct{}, skewRemembered)
	}
	if _, ok := w.seen[id]; ok {
		return
	}
	if len(w.seen) == skewRemembered {
		delete(w.seen, w.order[w.next])
	}
	w.seen[id] = struct{}{}
	w.order[w.next] = id
	w.next = (w.next + 1) % skewRemembered

	s := &w.minutes[(m%60+60)%60]
	if s.minute != m || s.n == 0 {
		s.minute, s.n = m, 0
	}
	switch {
	case s.n < skewSamples:
		s.samples[s.n] = skew
	default:
		if i := rand.IntN(s.n + 1); i < skewSamples {
			s.samples[i] = skew
		}
	}
	s.n++
}

// median returns the median of the skews the 60 minutes up to now saw, and how many
// those were. Each minute's sample stands for all the skews of its minute, each of its
// skews weighing its minute's count over the sample's size: a busy minute weighs as
// much as its deliveries, not as much as a quiet minute's.
func (w *skewWindow) median(now time.Time) (time.Duration, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := now.Unix() / 60
	type weighted struct {
		skew   time.Duration
		weight float64
	}
	var all []weighted
	n := 0
	for i := range w.minutes {
		s := &w.minutes[i]
		if s.n == 0 || s.minute > m || s.minute <= m-60 {
			continue
		}
		n += s.n
		kept := s.samples[:min(s.n, skewSamples)]
		for _, skew := range kept {
			all = append(all, weighted{skew, float64(s.n) / float64(len(kept))})
		}
	}
	if n == 0 {
		return 0, 0
	}
	slices.SortFunc(all, func(a, b weighted) int { return cmp.Compare(a.skew, b.skew) })
	half, below := float64(n)/2, 0.0
	for i, s := range all {
		below += s.weight
		switch {
		case below > half:
			return s.skew, n
		case below == half && i+1 < len(all):
			// Exactly half the weight at or below this one: the median lies between
			// it and the next, as for an even count of skews.
			return (s.skew + all[i+1].skew) / 2, n
		}
	}
	return all[len(all)-1].skew, n
}
