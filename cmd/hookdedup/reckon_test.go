package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// crashReckoning is what a crash test's reckoning counted.
type crashReckoning struct {
	sends, events, keys                 int
	answered, acceptedAns, duplicateAns int
	noAnswer, unavailable               int
	stored                              int
	total                               storagetest.Counts
	lostAnswers, notDispatched          int
	dispatched, handoffs                int
	attempts, interrupted               int
	explained, unexplained              int
	longestGap                          time.Duration
}

// String is the reckoning's part of a crash test's report.
func (x crashReckoning) String() string {
	return fmt.Sprintf(`  deliveries sent        %d (%d events, %d keys)
  answered 200           %d (%d accepted, %d duplicate)
  no answer (killed)     %d, 503 with Retry-After %d, other answers %d
  stored                 %d (%d accepted, %d duplicate, %d rejected); stored but never answered %d
  lost                   %d answered-200 not stored, %d keys answered 200 never dispatched
  dispatched             %d keys, %d hand-offs; %d attempts recorded, %d of them interrupted
  double dispatches      %d explained (in flight at a kill or an outage, same Idempotency-Key; longest hand-off-to-kill gap %s), %d unexplained`,
		x.sends, x.events, x.keys,
		x.answered, x.acceptedAns, x.duplicateAns,
		x.noAnswer, x.unavailable, x.sends-x.answered-x.noAnswer-x.unavailable,
		x.stored, x.total.Accepted, x.total.Duplicate, x.total.Rejected, x.stored-(x.answered-x.lostAnswers),
		x.lostAnswers, x.notDispatched,
		x.dispatched, x.handoffs, x.attempts, x.interrupted,
		x.explained, x.longestGap.Round(time.Millisecond), x.unexplained)
}

// inFlightAtKill bounds how long after a SIGKILL a hand-off that the killed process
// had already sent may still reach the sink.
const inFlightAtKill = time.Second

// reckon checks, once traffic has stopped and nothing is left processing, what the
// senders and the downstream saw against the database: every delivery answered 200 is
// stored as answered, every key was accepted once and reached the downstream with its
// own payload, and a key handed off twice had its earlier hand-off cut by a kill of the
// process that made it (killedAt: incarnation -> when it was killed). It fails t for
// each break, and returns the counts.
//
// With an outage (the database was down from outage[0] to outage[1]), 503 with
// Retry-After is an answer too, counted, and a hand-off made while the database could
// not record it (from an attempt's timeout before the outage to its end) may be made
// again, under the same key, once its lease has run out.
// too, counted; any other answer but 200 fails t.
func reckon(t *testing.T, db storage.Store, traffic *crashTraffic, sink *crashSink, events []*crashEvent, killedAt map[int]time.Time, outage []time.Time) crashReckoning {
	t.Helper()
	ctx := context.Background()
	wantKeys := map[string]*crashEvent{} // Idempotency-Key -> event
	for _, ev := range events {
		wantKeys[ev.source+":"+ev.key] = ev
	}
	var x crashReckoning
	traffic.mu.Lock()
	sends := slices.Clone(traffic.sends)
	traffic.mu.Unlock()
	var answered, acceptedAns, duplicateAns, noAnswer int
	other := map[string]int{}
	for _, s := range sends {
		switch {
		case s.code == 0:
			noAnswer++
		case s.code == 200:
			answered++
			if s.answer["status"] == "accepted" {
				acceptedAns++
			} else {
				duplicateAns++
			}
		case outage != nil && s.code == 503 && s.retryAfter != "":
			x.unavailable++
		default:
			other[fmt.Sprintf("%d %s", s.code, s.answer["error"])]++
		}
	}
	if len(other) > 0 {
		t.Errorf("answers other than 200 from a healthy database: %v", other)
	}

	// Every delivery answered 200 is stored, under its id, with its key and outcome.
	lostAnswers := 0
	for _, s := range sends {
		if s.code != 200 {
			continue
		}
		id, _ := strconv.ParseInt(s.answer["delivery"], 10, 64)
		d, err := db.Delivery(ctx, id)
		switch {
		case err != nil:
			lostAnswers++
			t.Errorf("answered 200 %v, but delivery %d: %v", s.answer, id, err)
		case d.Source != s.ev.source || d.Key != s.ev.key || s.answer["key"] != s.ev.key || string(d.Outcome) != s.answer["status"] ||
			(d.Outcome == storage.Duplicate && strconv.FormatInt(d.FirstDelivery, 10) != s.answer["first_delivery"]):
			lostAnswers++
			t.Errorf("answered 200 %v for %s/%s, but stored %s/%s %s first %d", s.answer, s.ev.source, s.ev.key, d.Source, d.Key, d.Outcome, d.FirstDelivery)
		}
	}

	// The claims agree with the deliveries; every accepted key reached the downstream;
	// a key handed off twice had its earlier hand-offs in flight at a kill.
	byKey := map[string][]crashReceipt{}
	for _, r := range sink.receipts() {
		byKey[r.key] = append(byKey[r.key], r)
	}
	var stored, notDispatched, explained, unexplained, handoffs, recorded, interrupted int
	var longestGap time.Duration
	for ik, ev := range wantKeys {
		all, err := db.KeyDeliveries(ctx, ev.source, ev.key)
		if err != nil {
			t.Fatal(err)
		}
		stored += len(all)
		rs := byKey[ik]
		handoffs += len(rs)
		if len(rs) == 0 {
			notDispatched++
			t.Errorf("%s: answered 200 but never reached the downstream", ik)
		}
		c, err := db.Claim(ctx, ev.source, ev.key)
		if err != nil {
			t.Errorf("%s: no claim: %v", ik, err)
			continue
		}
		// The accepted delivery first: on PostgreSQL ids are taken before the claims are
		// decided, and replicas commit in any order, so a duplicate may hold a lower id
		// than the delivery that won the key.
		var first int64
		for _, d := range all {
			if d.Outcome != storage.Accepted {
				continue
			}
			if first != 0 {
				t.Errorf("%s: two accepted deliveries (%d, %d) in one claim generation", ik, first, d.ID)
			}
			first = d.ID
			if !d.ReceivedAt.Equal(c.ClaimedAt) {
				t.Errorf("%s: accepted delivery %d at %v, claim made at %v", ik, d.ID, d.ReceivedAt, c.ClaimedAt)
			}
		}
		for _, d := range all {
			switch d.Outcome {
			case storage.Accepted:
			case storage.Duplicate:
				if first == 0 || d.FirstDelivery != first {
					t.Errorf("%s: duplicate %d points at %d, the accepted delivery is %d", ik, d.ID, d.FirstDelivery, first)
				}
			default:
				t.Errorf("%s: delivery %d is %s (%s)", ik, d.ID, d.Outcome, d.Error)
			}
		}
		if first == 0 || c.FirstDelivery != first || c.State != storage.StateProcessed {
			t.Errorf("%s: claim %+v, accepted delivery %d; want processed and pointing at it", ik, c, first)
		}
		attempts, err := db.Attempts(ctx, ev.source, ev.key)
		if err != nil {
			t.Fatal(err)
		}
		succeeded := 0
		for _, a := range attempts {
			switch a.Error {
			case "":
				succeeded++
			case storage.AttemptInterrupted:
				interrupted++
			}
		}
		// One success, or one for each hand-off the downstream took: an attempt whose
		// record failed in an outage keeps its outcome and records it once it can, also
		// after another replica took the key over and handed it off again.
		if succeeded < 1 || succeeded > len(rs) {
			t.Errorf("%s: %d successful attempts recorded, want 1, or one a hand-off of %d: %+v", ik, succeeded, len(rs), attempts)
		}
		// Every hand-off the downstream got is in the key's history: one cut off by a
		// kill as an interrupted attempt. A kill may also cut one before it arrived.
		recorded += len(attempts)
		if len(attempts) < len(rs) {
			t.Errorf("%s: the downstream got %d hand-offs, the key's history holds %d attempts: %+v", ik, len(rs), len(attempts), attempts)
		}

		if len(rs) == 0 {
			continue
		}
		// In the order they arrived.
		slices.SortFunc(rs, func(a, b crashReceipt) int { return a.at.Compare(b.at) })
		last := rs[len(rs)-1]
		for _, r := range rs {
			if r.hash != ev.hash || r.delivery != strconv.FormatInt(first, 10) {
				t.Errorf("%s: the downstream got delivery %s with payload %s, want delivery %d with %s", ik, r.delivery, r.hash[:12], first, ev.hash[:12])
			}
		}
		for _, r := range rs[:len(rs)-1] {
			// Explained: the process that made it was killed after it, and the key's
			// last hand-off came from another one, which took it over. A hand-off the
			// process had sent as it was killed may reach the sink a moment after the
			// kill: the bytes were on their way.
			killed, wasKilled := killedAt[r.inc]
			switch {
			case wasKilled && r.at.Before(killed.Add(inFlightAtKill)) && r.inc != last.inc:
				explained++
				longestGap = max(longestGap, killed.Sub(r.at))
			case outage != nil && r.at.After(outage[0].Add(-crashAttemptTimeout)) && r.at.Before(outage[1]):
				explained++
			default:
				unexplained++
				t.Errorf("%s: handed off twice without a kill in between: %s", ik, crashReceipts(rs))
			}
		}
	}
	total, err := storagetest.CountDeliveries(ctx, db, "")
	x.stored, x.total = stored, total
	if err != nil {
		t.Fatal(err)
	}
	if int(total.Accepted+total.Duplicate+total.Rejected) != stored {
		t.Errorf("the database holds %+v deliveries, %d of them under the senders' keys", total, stored)
	}
	keys, err := db.ListKeys(ctx, storage.KeyFilter{Limit: len(wantKeys) + 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(wantKeys) {
		t.Errorf("the database holds %d claims, the senders sent %d keys", len(keys), len(wantKeys))
	}
	for k := range byKey {
		if wantKeys[k] == nil {
			t.Errorf("the downstream got a key nobody sent: %q", k)
		}
	}

	x.sends, x.events, x.keys = len(sends), len(events), len(wantKeys)
	x.answered, x.acceptedAns, x.duplicateAns, x.noAnswer = answered, acceptedAns, duplicateAns, noAnswer
	x.lostAnswers, x.notDispatched = lostAnswers, notDispatched
	x.dispatched, x.handoffs = len(byKey), handoffs
	x.attempts, x.interrupted = recorded, interrupted
	x.explained, x.unexplained, x.longestGap = explained, unexplained, longestGap
	return x
}
