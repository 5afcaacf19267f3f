package enginetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// items makes the deliveries of one batched request, one per key.
func items(source string, keys ...string) []*storage.Delivery {
	out := make([]*storage.Delivery, len(keys))
	for i, k := range keys {
		out[i] = delivery(source, k, "hash-"+k)
	}
	return out
}

func TestRecordBatch(t *testing.T, e Engine) {
	ctx := context.Background()

	t.Run("ItemsNumberedFromTheFirst", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("adyen", "before", "h"), day) // the batch does not start at id 1
		b := items("adyen", "a", "b", "c")
		if err := db.RecordBatch(ctx, b, day); err != nil {
			t.Fatal(err)
		}
		for i, d := range b {
			if d.Outcome != storage.Accepted || d.Batch != b[0].ID || d.ID != b[0].ID+int64(i) {
				t.Fatalf("item %d: outcome %s, id %d, batch %d; want accepted, %d, %d",
					i, d.Outcome, d.ID, d.Batch, b[0].ID+int64(i), b[0].ID)
			}
			got, err := db.Delivery(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Batch != b[0].ID || got.BatchIndex != i {
				t.Fatalf("stored item %d: batch %d index %d; want %d and %d", i, got.Batch, got.BatchIndex, b[0].ID, i)
			}
		}
		listed, err := db.BatchDeliveries(ctx, b[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 3 || listed[2].ID != b[2].ID || listed[2].BatchIndex != 2 {
			t.Fatalf("BatchDeliveries = %d items, want the three in order", len(listed))
		}
		if _, err := db.BatchDeliveries(ctx, 1); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("BatchDeliveries of a single delivery = %v, want ErrNotFound", err)
		}
		single, err := db.Delivery(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if single.Batch != 0 || single.BatchIndex != 0 {
			t.Fatalf("a single delivery is stored with batch %d index %d; want 0 0", single.Batch, single.BatchIndex)
		}
	})

	t.Run("SameKeyTwiceInOneRequest", func(t *testing.T) {
		db := e.Open(t)
		b := items("adyen", "a", "a")
		if err := db.RecordBatch(ctx, b, day); err != nil {
			t.Fatal(err)
		}
		if b[0].Outcome != storage.Accepted || b[1].Outcome != storage.Duplicate || b[1].FirstDelivery != b[0].ID {
			t.Fatalf("outcomes %s, %s (first %d); want accepted, then a duplicate of %d",
				b[0].Outcome, b[1].Outcome, b[1].FirstDelivery, b[0].ID)
		}
	})

	t.Run("RedeliveredWithOneNew", func(t *testing.T) {
		db := e.Open(t)
		if err := db.RecordBatch(ctx, items("adyen", "a", "b"), day); err != nil {
			t.Fatal(err)
		}
		again := items("adyen", "a", "b", "c")
		if err := db.RecordBatch(ctx, again, day); err != nil {
			t.Fatal(err)
		}
		want := []storage.Outcome{storage.Duplicate, storage.Duplicate, storage.Accepted}
		for i, d := range again {
			if d.Outcome != want[i] {
				t.Errorf("item %d: %s, want %s", i, d.Outcome, want[i])
			}
		}
	})

	t.Run("RefusesRejections", func(t *testing.T) {
		db := e.Open(t)
		b := items("adyen", "a")
		b[0].Outcome = storage.Rejected
		if err := db.RecordBatch(ctx, b, day); err == nil {
			t.Fatal("a rejection was recorded as a batch item")
		}
	})
}

// TestRecordBatch_Envelope: what a batched request held besides its events is stored
// with every item, duplicates too, and comes back with each item read whole and with
// each item's job, so that each is handed downstream with it; a delivery that came
// alone has none.
func TestRecordBatch_Envelope(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	single := record(t, db, delivery("mews", "alone", "h"), dispatchDay)
	clk.Add(time.Second)
	const envelope = `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac87008b2f90",` +
		`"Note":"Zürich 😀 <script>","Big":12345678901234567890,"Rate":1.50}`
	b := items("mews", "e0", "e1", "e0")
	for _, d := range b {
		d.BatchEnvelope = envelope
	}
	if err := db.RecordBatch(ctx, b, dispatchDay); err != nil {
		t.Fatal(err)
	}
	if b[2].Outcome != storage.Duplicate {
		t.Fatalf("item 2: %s, want a duplicate of item 0", b[2].Outcome)
	}
	for i, d := range b {
		got, err := db.Delivery(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.BatchEnvelope != envelope {
			t.Errorf("item %d stored with envelope %q, want %q", i, got.BatchEnvelope, envelope)
		}
	}
	if got, err := db.Delivery(ctx, single.ID); err != nil || got.BatchEnvelope != "" {
		t.Fatalf("a delivery that came alone: envelope %q, %v; want none", got.BatchEnvelope, err)
	}
	// Read whole up to the size asked for, in bytes; past it, only its size.
	whole := storage.EnvelopeText{Size: len(envelope), Text: envelope}
	for _, c := range []struct {
		max  int
		want storage.EnvelopeText
	}{{len(envelope), whole}, {len(envelope) - 1, storage.EnvelopeText{Size: len(envelope)}}} {
		envelopes, err := db.BatchEnvelopes(ctx, []int64{single.ID, b[0].ID, b[1].ID, b[2].ID, 99999}, c.max)
		want := map[int64]storage.EnvelopeText{b[0].ID: c.want, b[1].ID: c.want, b[2].ID: c.want}
		if err != nil || !maps.Equal(envelopes, want) {
			t.Fatalf("batch envelopes up to %d bytes = %v, %v; want %v (none for the delivery that came alone, or for no delivery)",
				c.max, envelopes, err, want)
		}
	}
	keyed, err := db.KeyDeliveries(ctx, "mews", "e0")
	if err != nil || len(keyed) != 2 || keyed[0].BatchEnvelope != envelope || keyed[1].BatchEnvelope != envelope {
		t.Fatalf("the key's deliveries: %d, %v; want both with the envelope", len(keyed), err)
	}

	jobs := lease(t, db, clk.Now(), time.Minute, 10)
	if got := jobKeys(jobs); !slices.Equal(got, []string{"alone", "e0", "e1"}) {
		t.Fatalf("leased %v, want alone, e0 and e1", got)
	}
	if jobs[0].BatchEnvelope != "" {
		t.Errorf("the job of a delivery that came alone carries envelope %q", jobs[0].BatchEnvelope)
	}
	for _, j := range jobs[1:] {
		if j.BatchEnvelope != envelope || j.Batch != b[0].ID {
			t.Errorf("job of %s: batch %d, envelope %q; want %d and %q", j.Key, j.Batch, j.BatchEnvelope, b[0].ID, envelope)
		}
	}
}

// TestRecordBatch_EnvelopeKeptOnce: an item stored without an envelope of its own, past
// the first, is read with its first item's, whole and in its job: intake stores the
// envelope once.
func TestRecordBatch_EnvelopeKeptOnce(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	// Item 0 repeats this key, so that it is a duplicate, as in a redelivered request.
	record(t, db, delivery("mews", "e0", "hash-e0"), day)
	clk.Add(time.Second)
	const envelope = `{"EnterpriseId":"851df8c8","City":"Zürich"}`
	b := items("mews", "e0", "e1", "e2")
	b[0].BatchEnvelope = envelope
	if err := db.RecordBatch(ctx, b, dispatchDay); err != nil {
		t.Fatal(err)
	}
	for i, d := range b {
		got, err := db.Delivery(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.BatchEnvelope != envelope {
			t.Errorf("item %d read with envelope %q, want its first item's %q", i, got.BatchEnvelope, envelope)
		}
	}
	if keyed, err := db.KeyDeliveries(ctx, "mews", "e1"); err != nil || len(keyed) != 1 || keyed[0].BatchEnvelope != envelope {
		t.Fatalf("the deliveries of e1: %+v, %v; want one with its first item's envelope", keyed, err)
	}
	whole := storage.EnvelopeText{Size: len(envelope), Text: envelope}
	if got, err := db.BatchEnvelopes(ctx, []int64{b[2].ID, b[1].ID}, storage.BatchEnvelopeHeaderMax); err != nil || len(got) != 2 ||
		got[b[1].ID] != whole || got[b[2].ID] != whole {
		t.Fatalf("batch envelopes of items 1 and 2 = %v, %v; want their first item's", got, err)
	}
	if got, err := db.BatchEnvelopes(ctx, nil, storage.BatchEnvelopeHeaderMax); err != nil || len(got) != 0 {
		t.Fatalf("batch envelopes of no delivery = %v, %v", got, err)
	}
	jobs := lease(t, db, clk.Now(), time.Minute, 10)
	if got := jobKeys(jobs); !slices.Equal(got, []string{"e1", "e2"}) {
		t.Fatalf("leased %v, want e1 and e2", got)
	}
	for _, j := range jobs {
		if j.BatchEnvelope != envelope {
			t.Errorf("job of %s: envelope %q, want its first item's %q", j.Key, j.BatchEnvelope, envelope)
		}
	}
}

// TestSweepDeliveries_HandsOverEnvelopes: retention keeps the first item of a batched
// request, which keeps the request's envelope for all, while an item that reads it from
// there is kept: one still owed downstream (processing, or failed and then reprocessed)
// goes on with its envelope. The first item here is a duplicate, owed to no one, as in a
// redelivered request. Once the items after it are settled and swept, a later walk
// deletes it. A walk one delivery a batch, which looks at the first item before the
// others, keeps as much.
func TestSweepDeliveries_HandsOverEnvelopes(t *testing.T, e Engine) {
	for _, limit := range []int{100, 1} {
		t.Run(fmt.Sprintf("Limit%d", limit), func(t *testing.T) {
			ctx := context.Background()
			db := e.Open(t)
			clk := newClock(e, db)
			record(t, db, delivery("mews", "e0", "hash-e0"), day)
			clk.Add(time.Second)
			const envelope = `{"EnterpriseId":"851df8c8","City":"Zürich"}`
			// e0: a duplicate; e1: processing; e2: failed; e3: handed on, then expired;
			// and a duplicate of e1.
			b := items("mews", "e0", "e1", "e2", "e3", "e1")
			b[0].BatchEnvelope = envelope
			if err := db.RecordBatch(ctx, b, dispatchDay); err != nil {
				t.Fatal(err)
			}
			res := map[string]storage.AttemptResult{"e2": {Failed: true, LastError: "downstream answered 500"}, "e3": {Done: true}}
			for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
				if r, ok := res[j.Key]; ok {
					a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: clk.Now(), Error: r.LastError}
					if moved, err := db.FinishAttempt(ctx, j, a, r); err != nil || !moved {
						t.Fatalf("finish attempt of %s: moved %v, %v", j.Key, moved, err)
					}
				}
			}
			clk.Add(25 * time.Hour) // e3's claim has expired: its payload is owed no more
			if n := sweepAll(t, db, clk.Now(), limit); n != 3 {
				t.Errorf("the sweep deleted %d deliveries, want 3: e0 alone, item 3, and item 4, a duplicate", n)
			}
			for i, d := range b {
				got, err := db.Delivery(ctx, d.ID)
				switch {
				case i <= 2:
					if err != nil || got.BatchEnvelope != envelope {
						t.Errorf("item %d (%s), still owed or holding the envelope of one: envelope %q, %v; want %q",
							i, d.Key, got.BatchEnvelope, err, envelope)
					}
				case !errors.Is(err, storage.ErrNotFound):
					t.Errorf("item %d (%s) after the sweep: %v, want it swept", i, d.Key, err)
				}
			}
			if keyed, err := db.KeyDeliveries(ctx, "mews", "e2"); err != nil || len(keyed) != 1 || keyed[0].BatchEnvelope != envelope {
				t.Errorf("the deliveries of e2 after the sweep: %+v, %v; want one with its request's envelope", keyed, err)
			}
			if _, err := db.ReleaseKey(ctx, storage.Release{Source: "mews", Key: "e2", Actor: "sam",
				Reason: "downstream is back", Reprocess: true}); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Hour) // past e1's lease
			jobs := lease(t, db, clk.Now(), time.Minute, 10)
			if got := jobKeys(jobs); !slices.Equal(got, []string{"e1", "e2"}) {
				t.Fatalf("leased %v after the sweep, want e1 and e2", got)
			}
			for _, j := range jobs {
				if !j.Stored || j.BatchEnvelope != envelope {
					t.Errorf("job of %s after the sweep: stored %t, envelope %q; want its request's %q", j.Key, j.Stored, j.BatchEnvelope, envelope)
				}
				a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: clk.Now(), Status: 200}
				if moved, err := db.FinishAttempt(ctx, j, a, storage.AttemptResult{Done: true}); err != nil || !moved {
					t.Fatalf("finish attempt of %s: moved %v, %v", j.Key, moved, err)
				}
			}
			// Handed on, and their claims expired: nothing reads the first item's envelope
			// any more. A walk that looks at the first item with the others deletes the
			// three; one that looks at it alone, before them, keeps it for the next.
			clk.Add(25 * time.Hour)
			n := sweepAll(t, db, clk.Now(), limit)
			if limit == 1 {
				n += sweepAll(t, db, clk.Now(), limit)
			}
			if n != 3 {
				t.Errorf("the later sweeps deleted %d deliveries, want 3: items 0, 1 and 2", n)
			}
			for i, d := range b[:3] {
				if _, err := db.Delivery(ctx, d.ID); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("item %d (%s) after the second sweep: %v, want it swept", i, d.Key, err)
				}
			}
		})
	}
}

// A redelivered request whose first item is a byte-for-byte duplicate, stored by
// reference to the first request's item (body_from), and whose second item is a new
// event still owed downstream: at retention the duplicate is kept, as it holds the
// envelope the owed item reads, while the first delivery it refers to is deleted. The
// duplicate gets its own copy of the body first, whichever walk deletes that delivery.
func TestSweepDeliveries_EnvelopeHolderKeepsItsBody(t *testing.T, e Engine) {
	for _, limit := range []int{100, 1} {
		t.Run(fmt.Sprintf("Limit%d", limit), func(t *testing.T) {
			ctx := context.Background()
			db := e.Open(t)
			clk := newClock(e, db)
			opt := storage.ClaimOptions{TTL: time.Hour, Dispatch: true}
			const envelope = `{"EnterpriseId":"e1","Events":null}`

			// The first request: A and B, both handed downstream.
			first := items("mews", "A", "B")
			first[0].BatchEnvelope = envelope
			if err := db.RecordBatch(ctx, first, opt); err != nil {
				t.Fatal(err)
			}
			for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
				a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: clk.Now(), Status: 200}
				if moved, err := db.FinishAttempt(ctx, j, a, storage.AttemptResult{Done: true}); err != nil || !moved {
					t.Fatalf("finish attempt of %s: moved %v, %v", j.Key, moved, err)
				}
			}
			// A minute later the sender sends A again, byte for byte, with a new event C,
			// whose downstream is down: C stays processing, owed.
			clk.Add(time.Minute)
			again := items("mews", "A", "C")
			again[0].BatchEnvelope = envelope
			if err := db.RecordBatch(ctx, again, opt); err != nil {
				t.Fatal(err)
			}
			dup, owed := again[0], again[1]
			if dup.Outcome != storage.Duplicate || dup.FirstDelivery != first[0].ID || owed.Outcome != storage.Accepted {
				t.Fatalf("the redelivered request: %s (first %d), %s; want a duplicate of %d, accepted",
					dup.Outcome, dup.FirstDelivery, owed.Outcome, first[0].ID)
			}

			// Three hours on, with two hours' retention: A's and B's claims expired, C owed.
			// A walk that looks at the first request's A alone keeps it for B, which is
			// past that batch; the next walk deletes it.
			clk.Add(3 * time.Hour)
			n := sweepAll(t, db, clk.Now().Add(-2*time.Hour), limit)
			if limit == 1 {
				n += sweepAll(t, db, clk.Now().Add(-2*time.Hour), limit)
			}
			if n != 2 {
				t.Errorf("the sweeps deleted %d deliveries, want 2: A and B of the first request", n)
			}
			for _, d := range first {
				if _, err := db.Delivery(ctx, d.ID); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("%s of the first request after the sweep: %v, want it swept", d.Key, err)
				}
			}
			got, err := db.Delivery(ctx, owed.ID)
			if err != nil || got.BatchEnvelope != envelope {
				t.Errorf("the owed item C after the sweep: envelope %q, %v; want kept with %q", got.BatchEnvelope, err, envelope)
			}
			got, err = db.Delivery(ctx, dup.ID)
			if err != nil || string(got.Body) != string(first[0].Body) {
				t.Errorf("the duplicate of A, kept for its envelope, after the sweep: body %q, %v; want %q",
					got.Body, err, first[0].Body)
			}
			keyed, err := db.KeyDeliveries(ctx, "mews", "A")
			if err != nil || len(keyed) != 1 || keyed[0].ID != dup.ID || string(keyed[0].Body) != string(first[0].Body) {
				t.Errorf("the deliveries of A after the sweep: %+v, %v; want the duplicate %d with body %q",
					keyed, err, dup.ID, first[0].Body)
			}
		})
	}
}
