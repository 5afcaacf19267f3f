package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// Forensics at intake: the doubles that transport deduplication cannot see. Record runs
// these checks in the transaction that claims its rows' keys (traceTakenOver before the
// claims, checkRows after the inserts), so that a flag is committed with its delivery, and
// business_key_blocks can turn a delivery into a duplicate before anything hands it
// downstream.
//
//   - A duplicate whose payload differs from its first delivery's in amount, currency
//     or event status is a money mismatch (deliveries.money_mismatch).
//   - An accepted delivery whose business key another accepted delivery of its source
//     carries within the window, under another key, is a suspected duplicate.
//   - An accepted delivery whose correlation key (booking, amount, currency) another
//     source of the same rule delivered within the rule's window is a suspected double.
//   - An accepted delivery whose key was held before by a claim that has since expired
//     (a trace of it, or the expired claim it takes over) is a late duplicate.
//
// Each suspected pair is one suspects row, on the delivery recorded second, naming the
// first in other: the first finds it through the suspects_other index, and one row is
// one decision for a reviewer, and counts the money at stake once. Of two replicas'
// deliveries, the first is the one whose transaction took the key's lock first
// (below), whichever id is the smaller.
//
// Replicas record at once, each in its own transaction, and a transaction does not see
// what another has not committed: two deliveries of one business key recorded together
// would each find nothing and both stand as the original. So the recording that looks
// a business or correlation key up holds that key's lock (forensicKeyLocks) from before
// the look-up until its commit: the other waits, then looks, and finds the first.
//
// The rows' deliveries are as they are stored (storable): what the checks compare and
// write of them needs no escaping here.

// queueTraceTakenOver queues on b the statement that writes the traces of the expired
// processed claims that rows of ask take over, as the sweep writes those it deletes: a
// delivery of such a key within the remember period is a late duplicate, and the first
// one, the row that takes the claim over, finds its trace as any later one does
// (lateDuplicates, sqlLateSuspects).
//
// It locks the processed claims of ask's keys first, expired or not, sorted by source
// and key byte for byte as the claim statement takes them, which would lock them a
// moment later anyway: no other transaction can take one over, or sweep it, between
// this read and the claim, so every claim traced here is the one its row takes over,
// and the sweep, which skips locked claims, never waits on this trace nor this on the
// sweep's. Another replica's takeover committed first shows here as a live claim, not
// traced; a sweep committed first shows as no claim, and the sweep's own trace is found
// later.
//
// It reports whether it queued one: ask has no row that claims a key otherwise.
func queueTraceTakenOver(b *pgx.Batch, ask []*recordRow) bool {
	if len(ask) == 0 {
		return false
	}
	type sk struct{ source, key string }
	at := map[sk]int{} // place in the arrays below
	var sources, keys []string
	var latest []int64
	for _, r := range ask {
		k := sk{r.d.Source, r.d.Key}
		// The key is taken over by its first row received once its claim expired: the
		// latest time of its rows says whether any is.
		ms := millis(r.d.ReceivedAt)
		if i, ok := at[k]; ok {
			latest[i] = max(latest[i], ms)
			continue
		}
		at[k] = len(sources)
		sources, keys, latest = append(sources, k.source), append(keys, k.key), append(latest, ms)
	}
	// The claims are locked in the arrays' order: sorted byte for byte, as the claim
	// statement takes them.
	order := make([]int, len(sources))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(sources[a], sources[b]), cmp.Compare(keys[a], keys[b]))
	})
	sortedSources, sortedKeys := make([]string, len(order)), make([]string, len(order))
	hashes, sortedLatest := make([][]byte, len(order)), make([]int64, len(order))
	for i, j := range order {
		sortedSources[i], sortedKeys[i], sortedLatest[i] = sources[j], keys[j], latest[j]
		hashes[i] = storage.KeyHash(keys[j])
	}
	b.Queue(sqlTraceTakenOver, sortedSources, sortedKeys, hashes, sortedLatest)
	return true
}

// sqlTraceTakenOver writes the traces of the expired processed claims of keys ($1, $2,
// sorted), whose hashes are $3, taken over by rows received at $4 at the latest. Each
// key's claim is looked up and locked on its own (a lateral subquery, kept from being
// merged into a join by its OFFSET), in the arrays' order: one index probe a key,
// whatever the planner thinks of the table's size, and the locks taken in one order.
const sqlTraceTakenOver = `
WITH held AS MATERIALIZED (
	SELECT v.source, v.hash, c.claimed_at, c.first_delivery, c.expires_at, v.at
	FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[]) AS v(source, key, hash, at)
	CROSS JOIN LATERAL (SELECT claimed_at, first_delivery, expires_at FROM claims
		WHERE source = v.source AND key = v.key AND state = 'processed' OFFSET 0 FOR UPDATE) AS c)
INSERT INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at)
SELECT source, hash, claimed_at, first_delivery, expires_at FROM held WHERE expires_at <= at
ON CONFLICT (source, key_hash) DO UPDATE SET first_seen = excluded.first_seen,
	first_delivery = excluded.first_delivery, expired_at = excluded.expired_at`

// suspectFlag is a suspect found on a row, written with the others at the end.
type suspectFlag struct {
	r           *recordRow
	kind        storage.SuspectKind
	other       int64  // the delivery it doubles, 0 when unknown
	otherSource string // "" for the flagged delivery's own source
	rule        string
	firstSeen   int64
}

// flag records a suspect of kind on r; the row is written by addSuspects.
func flag(flags []suspectFlag, r *recordRow, kind storage.SuspectKind, other int64, otherSource, rule string, firstSeen int64) []suspectFlag {
	r.suspects = append(r.suspects, kind)
	return append(flags, suspectFlag{r: r, kind: kind, other: other, otherSource: otherSource, rule: rule, firstSeen: firstSeen})
}

// checkRows runs the checks on a transaction's rows once their claims are made and
// their deliveries inserted, and sets each row's flags. A row that business_key_blocks
// turns into a duplicate is rewritten as one here: outcome duplicate, its first
// delivery the one it doubles, and its claim undone (see block).
func checkRows(ctx context.Context, tx querier, rows []*recordRow) error {
	if err := moneyMismatches(ctx, tx, rows); err != nil {
		return fmt.Errorf("money mismatch: %w", err)
	}
	var acc []*recordRow
	for _, r := range rows {
		if r.outcome == storage.Accepted {
			acc = append(acc, r)
		}
	}
	if len(acc) == 0 {
		return nil
	}
	if err := forensicKeyLocks(ctx, tx, acc); err != nil {
		return err
	}
	// Business keys first: a blocked row is accepted no more, and takes no other flag.
	flags, err := businessKeys(ctx, tx, rows, acc, nil)
	if err != nil {
		return fmt.Errorf("business keys: %w", err)
	}
	if flags, err = lateDuplicates(ctx, tx, acc, flags); err != nil {
		return fmt.Errorf("late duplicates: %w", err)
	}
	if flags, err = correlations(ctx, tx, acc, flags); err != nil {
		return fmt.Errorf("correlations: %w", err)
	}
	return addSuspects(ctx, tx, flags)
}

// fullChecks reports whether rows need checkRows: a duplicate whose payload differs
// from its first delivery's (a money mismatch, perhaps), or an accepted row with a
// business key or a correlation key to look up. Otherwise the only check is for late
// duplicates, which queueLateSuspects makes in one statement that the commit can follow
// in the same round trip.
func fullChecks(rows []*recordRow) bool {
	for _, r := range rows {
		switch r.outcome {
		case storage.Duplicate:
			if r.mismatch {
				return true
			}
		case storage.Accepted:
			if (r.d.BusinessKey != "" && r.claim.BusinessWindow > 0) || len(r.d.Correlations) > 0 {
				return true
			}
		}
	}
	return false
}

// sqlLateSuspects is lateDuplicates and addSuspects in one statement, for rows that need
// no other check: it flags each delivery ($1, in order) whose key ($2, $3) has a trace,
// as addSuspects would write the flag, and returns the deliveries flagged.
const sqlLateSuspects = `INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at)
SELECT 'late_duplicate', d.id, CASE WHEN EXISTS (SELECT 1 FROM deliveries AS f WHERE f.id = t.first_delivery)
	THEN t.first_delivery ELSE 0 END, d.source, d.source, '', d.property, d.booking, d.amount, d.currency,
	t.first_seen, d.received_at
FROM unnest($1::bigint[], $2::text[], $3::bytea[]) WITH ORDINALITY AS v(delivery, source, hash, i)
JOIN key_traces AS t ON t.source = v.source AND t.key_hash = v.hash
JOIN deliveries AS d ON d.id = v.delivery
ORDER BY v.i
RETURNING delivery`

// queueLateSuspects queues on b, after the statement that inserts rows, the check of
// rows for late duplicates (sqlLateSuspects), when fullChecks says it is the only one
// they need. It reports whether it queued it: none of rows is accepted otherwise.
func queueLateSuspects(b *pgx.Batch, rows []*recordRow) bool {
	var ids []int64
	var sources []string
	var hashes [][]byte
	for _, r := range rows {
		if r.outcome == storage.Accepted {
			ids, sources = append(ids, r.id), append(sources, r.d.Source)
			hashes = append(hashes, storage.KeyHash(r.d.Key))
		}
	}
	if len(ids) == 0 {
		return false
	}
	b.Queue(sqlLateSuspects, ids, sources, hashes)
	return true
}

// readLateSuspects reads the answer of sqlLateSuspects and flags the rows it names.
func readLateSuspects(res pgx.Rows, rows []*recordRow) error {
	flagged, err := pgx.CollectRows(res, pgx.RowTo[int64])
	if err != nil || len(flagged) == 0 {
		return err
	}
	byID := make(map[int64]*recordRow, len(rows))
	for _, r := range rows {
		byID[r.id] = r
	}
	for _, id := range flagged {
		r := byID[id]
		if r == nil {
			return fmt.Errorf("flagged delivery %d, which is not in the transaction", id)
		}
		r.suspects = append(r.suspects, storage.SuspectLateDuplicate)
	}
	return nil
}

// moneyMismatches flags the duplicates of rows whose payload differs from their first
// delivery's when the amount, the currency or the event status differ too. Every row is
// inserted already, and so is every first delivery (earlier, or in this transaction):
// one statement compares them as stored. A first delivery swept by retention has
// nothing to compare with.
func moneyMismatches(ctx context.Context, tx querier, rows []*recordRow) error {
	var ids []int64
	byID := map[int64]*recordRow{}
	for _, r := range rows {
		if r.outcome == storage.Duplicate && r.mismatch {
			ids = append(ids, r.id)
			byID[r.id] = r
		}
	}
	if len(ids) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, `UPDATE deliveries AS d SET money_mismatch = true
FROM deliveries AS f
WHERE d.id = ANY($1) AND f.id = d.first_delivery
	AND (f.amount <> d.amount OR f.currency <> d.currency OR f.event_status <> d.event_status)
RETURNING d.id`, ids)
	if err != nil {
		return err
	}
	flagged, err := pgx.CollectRows(res, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	for _, id := range flagged {
		byID[id].moneyMismatch = true
	}
	return nil
}

// forensicKeyLocks takes the lock of every business and correlation key of acc that the
// checks will look up and store, all at once, in one order (so that two recordings
// that share keys cannot wait on each other in a cycle), each held until the commit.
// The claims this transaction holds are taken before (Record claims first), and a
// holder of these locks waits on no other transaction's rows, only on locks taken in
// this order.
func forensicKeyLocks(ctx context.Context, tx querier, acc []*recordRow) error {
	var ids []int32
	for _, r := range acc {
		if r.d.BusinessKey != "" && r.claim.BusinessWindow > 0 {
			ids = append(ids, forensicKeyLockID("business", r.d.Source, r.d.BusinessKey))
		}
		for _, c := range r.d.Correlations {
			ids = append(ids, forensicKeyLockID("correlation", c.Rule, c.Hash))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// unnest yields the ids in the array's order, and each row's lock is taken as it
	// comes: in ascending order.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k`,
		int32(forensicKeyLock&0xffffffff), ids); err != nil {
		return fmt.Errorf("lock forensic keys: %w", err)
	}
	return nil
}

// forensicKeyLockID is the second half of the lock of one business key (of a source) or
// correlation key (of a rule). Two keys may share one: they then wait on each other for
// nothing worse than a moment.
func forensicKeyLockID(kind, scope, hash string) int32 {
	h := fnv.New32a()
	for _, s := range []string{kind, scope, hash} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int32(h.Sum32())
}

// businessKeys looks up the business keys of the accepted rows acc, flags or blocks
// those found, and stores the keys of those that stay accepted. rows is the whole
// transaction. A key is found in the database (the earliest within the window) or,
// failing that, earlier in the transaction.
func businessKeys(ctx context.Context, tx querier, rows, acc []*recordRow, flags []suspectFlag) ([]suspectFlag, error) {
	var cand []*recordRow
	for _, r := range acc {
		if r.d.BusinessKey != "" && r.claim.BusinessWindow > 0 {
			cand = append(cand, r)
		}
	}
	if len(cand) == 0 {
		return flags, nil
	}
	ids := make([]int64, len(cand))
	hashes := make([]string, len(cand))
	since := make([]int64, len(cand))
	for i, r := range cand {
		ids[i], hashes[i] = r.id, r.d.BusinessKey
		since[i] = millis(r.d.ReceivedAt) - r.claim.BusinessWindow.Milliseconds()
	}
	// The earliest accepted delivery of the source with the business key within the
	// window, under another key than the row's (read from its row, inserted already). A
	// delivery swept by retention no longer names its key: it counts as another's, as
	// its business key row outlived it. "+ 0" keeps the planner off the index of seen
	// times, which would walk every key of the window: the primary key finds one key's
	// earliest delivery in one seek.
	res, err := tx.Query(ctx, `
SELECT v.i, (SELECT bk.delivery FROM business_keys AS bk LEFT JOIN deliveries AS d ON d.id = bk.delivery
	WHERE bk.source = me.source AND bk.hash = v.hash AND bk.seen_at + 0 >= v.since AND coalesce(d.key, '') <> me.key
	ORDER BY bk.delivery LIMIT 1)
FROM unnest($1::bigint[], $2::text[], $3::bigint[]) WITH ORDINALITY AS v(id, hash, since, i)
JOIN deliveries AS me ON me.id = v.id`, ids, hashes, since)
	if err != nil {
		return nil, err
	}
	found := make([]int64, len(cand))
	var i int64
	var other *int64
	_, err = pgx.ForEachRow(res, []any{&i, &other}, func() error {
		if other != nil {
			found[i-1] = *other
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	type bkey struct{ source, hash string }
	first := map[bkey]*recordRow{}
	var add []*recordRow
	for j, r := range cand {
		k := bkey{r.d.Source, r.d.BusinessKey}
		other := found[j]
		if e, ok := first[k]; other == 0 && ok && e.d.Key != r.d.Key &&
			r.d.ReceivedAt.Sub(e.d.ReceivedAt) <= r.claim.BusinessWindow {
			other = e.id
		}
		if other != 0 && r.claim.BusinessBlocks {
			if err := block(ctx, tx, rows, r, other); err != nil {
				return nil, err
			}
			continue
		}
		if other != 0 {
			flags = flag(flags, r, storage.SuspectBusinessKey, other, "", "", 0)
		}
		if _, ok := first[k]; !ok {
			first[k] = r
		}
		add = append(add, r)
	}
	if len(add) == 0 {
		return flags, nil
	}
	n := len(add)
	sources, addHashes, addIDs, seen := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n)
	for i, r := range add {
		sources[i], addHashes[i] = r.d.Source, r.d.BusinessKey
		addIDs[i], seen[i] = r.id, millis(r.d.ReceivedAt)
	}
	_, err = tx.Exec(ctx, `INSERT INTO business_keys (source, hash, delivery, seen_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) ON CONFLICT DO NOTHING`,
		sources, addHashes, addIDs, seen)
	return flags, err
}

// block turns r, accepted, into a duplicate of other, the delivery whose business key it
// repeats. Its claim is undone rather than kept: a claim says that its first delivery's
// event was taken in, and this one was not, so the keys pages list it nowhere, and a
// redelivery of its key meets the same business key and is blocked the same way (while
// the window lasts). Rows of the transaction that lost their key's claim to r are
// repointed to other too, as r's redeliveries.
func block(ctx context.Context, tx querier, rows []*recordRow, r *recordRow, other int64) error {
	// The claim is found by the key as r's row stores it.
	if _, err := tx.Exec(ctx, `DELETE FROM claims
WHERE (source, key) = (SELECT source, key FROM deliveries WHERE id = $1) AND first_delivery = $1`, r.id); err != nil {
		return fmt.Errorf("block: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE deliveries SET outcome = 'duplicate', first_delivery = $2 WHERE id = $1`,
		r.id, other); err != nil {
		return fmt.Errorf("block: %w", err)
	}
	blocked := r.id
	r.outcome, r.first = storage.Duplicate, other
	for _, o := range rows {
		if o != r && o.outcome == storage.Duplicate && o.first == blocked {
			o.first = other
			if _, err := tx.Exec(ctx, `UPDATE deliveries SET first_delivery = $2 WHERE id = $1`, o.id, other); err != nil {
				return fmt.Errorf("block: %w", err)
			}
		}
		// A redelivery that stored its body as a reference to the blocked one gets its
		// own copy: the blocked delivery is owed nothing and no longer accepted, so the
		// retention sweep deletes it without handing its body over.
		if o != r && o.bodyFrom == blocked {
			o.bodyFrom = 0
			if _, err := tx.Exec(ctx, `UPDATE deliveries
SET body = (SELECT b.body FROM deliveries AS b WHERE b.id = $2), body_from = 0 WHERE id = $1`, o.id, blocked); err != nil {
				return fmt.Errorf("block: %w", err)
			}
		}
	}
	return nil
}

// lateDuplicates flags the rows of acc still accepted whose key was claimed before: a
// trace the sweep left, or that traceTakenOver wrote of the claim the row took over.
func lateDuplicates(ctx context.Context, tx querier, acc []*recordRow, flags []suspectFlag) ([]suspectFlag, error) {
	var look []*recordRow
	var sources []string
	var hashes [][]byte
	for _, r := range acc {
		if r.outcome == storage.Accepted {
			look = append(look, r)
			sources = append(sources, r.d.Source)
			hashes = append(hashes, storage.KeyHash(r.d.Key))
		}
	}
	if len(look) == 0 {
		return flags, nil
	}
	res, err := tx.Query(ctx, `
SELECT v.i, t.first_seen, CASE WHEN EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = t.first_delivery)
	THEN t.first_delivery ELSE 0 END
FROM unnest($1::text[], $2::bytea[]) WITH ORDINALITY AS v(source, hash, i)
JOIN key_traces AS t ON t.source = v.source AND t.key_hash = v.hash
ORDER BY v.i`, sources, hashes)
	if err != nil {
		return nil, err
	}
	var i, firstSeen, other int64
	_, err = pgx.ForEachRow(res, []any{&i, &firstSeen, &other}, func() error {
		flags = flag(flags, look[i-1], storage.SuspectLateDuplicate, other, "", "", firstSeen)
		return nil
	})
	return flags, err
}

// correlation is one correlation key of an accepted row.
type correlation struct {
	r *recordRow
	c storage.CorrelationKey
}

// correlations looks up the correlation keys of the rows of acc still accepted, flags
// those another source of the rule delivered within its window (in the database, or
// earlier in the transaction), and stores them all.
func correlations(ctx context.Context, tx querier, acc []*recordRow, flags []suspectFlag) ([]suspectFlag, error) {
	var all []correlation
	for _, r := range acc {
		if r.outcome != storage.Accepted {
			continue
		}
		for _, c := range r.d.Correlations {
			all = append(all, correlation{r, c})
		}
	}
	if len(all) == 0 {
		return flags, nil
	}
	rules := make([]string, len(all))
	hashes := make([]string, len(all))
	sources := make([]string, len(all))
	ids := make([]int64, len(all))
	times := make([]int64, len(all)) // the window's start, then the time seen
	for i, p := range all {
		rules[i], hashes[i], sources[i] = p.c.Rule, p.c.Hash, p.r.d.Source
		ids[i], times[i] = p.r.id, millis(p.r.d.ReceivedAt)-p.c.Window.Milliseconds()
	}
	type match struct {
		other  int64
		source string
	}
	found := make([]match, len(all))
	// The earliest delivery of another source of the rule with the correlation key
	// within the window, through the primary key (as for business keys).
	res, err := tx.Query(ctx, `
SELECT v.i, ck.delivery, ck.source
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) WITH ORDINALITY AS v(rule, hash, since, source, i)
CROSS JOIN LATERAL (SELECT c.delivery, c.source FROM correlation_keys AS c
	WHERE c.rule = v.rule AND c.hash = v.hash AND c.seen_at + 0 >= v.since AND c.source <> v.source
	ORDER BY c.delivery LIMIT 1) AS ck`, rules, hashes, times, sources)
	if err != nil {
		return nil, err
	}
	var i int64
	var m match
	_, err = pgx.ForEachRow(res, []any{&i, &m.other, &m.source}, func() error {
		found[i-1] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	for j, p := range all {
		m := found[j]
		for _, e := range all[:j] {
			if m.other != 0 {
				break
			}
			if e.c.Rule == p.c.Rule && e.c.Hash == p.c.Hash && e.r.d.Source != p.r.d.Source &&
				p.r.d.ReceivedAt.Sub(e.r.d.ReceivedAt) <= p.c.Window {
				m = match{e.r.id, e.r.d.Source}
			}
		}
		if m.other != 0 {
			flags = flag(flags, p.r, storage.SuspectCorrelation, m.other, m.source, p.c.Rule, 0)
		}
	}
	for i, p := range all {
		times[i] = millis(p.r.d.ReceivedAt)
	}
	_, err = tx.Exec(ctx, `INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) ON CONFLICT DO NOTHING`,
		rules, hashes, sources, ids, times)
	return flags, err
}

// addSuspects writes the suspects found, in the order found, in one statement. What a
// suspect repeats of its delivery (source, property, booking, amount, currency, when
// it was received) is read from the delivery's row, as stored.
func addSuspects(ctx context.Context, tx querier, flags []suspectFlag) error {
	if len(flags) == 0 {
		return nil
	}
	n := len(flags)
	kinds, otherSources, rules := make([]string, n), make([]string, n), make([]string, n)
	ids, others, firstSeen := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, f := range flags {
		kinds[i], otherSources[i], rules[i] = string(f.kind), f.otherSource, f.rule
		ids[i], others[i], firstSeen[i] = f.r.id, f.other, f.firstSeen
	}
	_, err := tx.Exec(ctx, `INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at)
SELECT v.kind, d.id, v.other, d.source, CASE WHEN v.other_source = '' THEN d.source ELSE v.other_source END, v.rule,
	d.property, d.booking, d.amount, d.currency, v.first_seen, d.received_at
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[])
	WITH ORDINALITY AS v(kind, delivery, other, other_source, rule, first_seen, i)
JOIN deliveries AS d ON d.id = v.delivery
ORDER BY v.i`, kinds, ids, others, otherSources, rules, firstSeen)
	if err != nil {
		return fmt.Errorf("flag suspects: %w", err)
	}
	return nil
}

// SweepTraces deletes at most limit traces of keys that expired before cutoff (now
// less the remember period), oldest first, and returns how many it deleted; 0 while
// another replica sweeps them.
func (db *DB) SweepTraces(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "key traces", sweepTracesLock, `DELETE FROM key_traces
WHERE ctid = ANY (ARRAY(SELECT ctid FROM key_traces WHERE expired_at < $1 ORDER BY expired_at LIMIT $2))
	AND expired_at < $1`, cutoff, limit)
}

// SweepBusinessKeys deletes at most limit business keys seen before cutoff (now less
// the longest business window), oldest first, and returns how many it deleted; 0 while
// another replica sweeps them. A key older than its own source's window is never
// matched (the lookup bounds it too); the sweep only keeps the table small.
func (db *DB) SweepBusinessKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "business keys", sweepBusinessKeysLock, `DELETE FROM business_keys
WHERE ctid = ANY (ARRAY(SELECT ctid FROM business_keys WHERE seen_at < $1 ORDER BY seen_at LIMIT $2))
	AND seen_at < $1`, cutoff, limit)
}

// SweepCorrelationKeys deletes at most limit correlation keys seen before cutoff (now
// less the longest correlation window), oldest first, and returns how many it deleted;
// 0 while another replica sweeps them.
func (db *DB) SweepCorrelationKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "correlation keys", sweepCorrelationKeysLock, `DELETE FROM correlation_keys
WHERE ctid = ANY (ARRAY(SELECT ctid FROM correlation_keys WHERE seen_at < $1 ORDER BY seen_at LIMIT $2))
	AND seen_at < $1`, cutoff, limit)
}

// sweepSeen runs q, a bounded DELETE of rows older than its $1, holding lock for its
// transaction: when another replica holds it, that one is sweeping, and this one does
// nothing this round. The rows are found by their ctid, so that a row rewritten since
// the look-up (a trace renewed by a later expiry) is left alone rather than deleted by
// its key; the repeated bound keeps it so even if PostgreSQL re-reads it.
func (db *DB) sweepSeen(ctx context.Context, what string, lock int64, q string, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if mine, err := tryLock(ctx, tx, lock); err != nil || !mine {
			return err
		}
		tag, err := tx.Exec(ctx, q, millis(cutoff), max(limit, 1))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", what, err)
	}
	return n, nil
}

// WouldFlag returns the suspects a delivery described by p would be flagged as, were it
// accepted at p.Now, without writing anything: a business key seen within the window
// under another key, a correlation through another source, a trace of its expired key
// (or an expired claim it would take over). Each has Kind, Other, OtherSource, Rule and
// FirstSeen set.
func (db *DB) WouldFlag(ctx context.Context, p storage.Probe) ([]storage.Suspect, error) {
	at := millis(p.Now)
	// Text as intake stores it (textSafe). A key that text cannot hold is refused at
	// intake, so no claim or trace holds it: only its business key and correlations
	// are looked up.
	source, key := textSafe(p.Source), textSafe(p.Key)
	storable := claimKeyProblem("key", p.Key) == ""
	var out []storage.Suspect
	if p.BusinessKey != "" && p.BusinessWindow > 0 {
		var other int64
		err := db.pool.QueryRow(ctx, `SELECT bk.delivery FROM business_keys AS bk LEFT JOIN deliveries AS d ON d.id = bk.delivery
WHERE bk.source = $1 AND bk.hash = $2 AND bk.seen_at + 0 >= $3 AND coalesce(d.key, '') <> $4
ORDER BY bk.delivery LIMIT 1`, source, textSafe(p.BusinessKey), at-p.BusinessWindow.Milliseconds(), key).Scan(&other)
		switch {
		case err == nil:
			out = append(out, storage.Suspect{Kind: storage.SuspectBusinessKey, Other: other, Source: p.Source, OtherSource: p.Source})
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("would flag: business key: %w", err)
		}
	}
	if p.Key != "" && storable {
		var first, claimedAt, expiresAt int64
		err := db.pool.QueryRow(ctx, `SELECT first_delivery, claimed_at, expires_at FROM claims
WHERE source = $1 AND key = $2 AND state = 'processed'`, source, key).Scan(&first, &claimedAt, &expiresAt)
		switch {
		case err == nil && expiresAt <= at:
			out = append(out, storage.Suspect{Kind: storage.SuspectLateDuplicate, Other: first, Source: p.Source, FirstSeen: fromMillis(claimedAt)})
		case err == nil:
			// Held: the delivery would be a duplicate, not a late one.
		case errors.Is(err, pgx.ErrNoRows):
			var firstSeen, other int64
			err := db.pool.QueryRow(ctx, `SELECT t.first_seen,
	CASE WHEN EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = t.first_delivery) THEN t.first_delivery ELSE 0 END
FROM key_traces AS t WHERE t.source = $1 AND t.key_hash = $2`, source, storage.KeyHash(key)).Scan(&firstSeen, &other)
			switch {
			case err == nil:
				out = append(out, storage.Suspect{Kind: storage.SuspectLateDuplicate, Other: other, Source: p.Source, FirstSeen: fromMillis(firstSeen)})
			case !errors.Is(err, pgx.ErrNoRows):
				return nil, fmt.Errorf("would flag: trace: %w", err)
			}
		default:
			return nil, fmt.Errorf("would flag: claim: %w", err)
		}
	}
	for _, c := range p.Correlations {
		var other int64
		var otherSource string
		err := db.pool.QueryRow(ctx, `SELECT delivery, source FROM correlation_keys
WHERE rule = $1 AND hash = $2 AND seen_at + 0 >= $3 AND source <> $4
ORDER BY delivery LIMIT 1`, textSafe(c.Rule), textSafe(c.Hash), at-c.Window.Milliseconds(), source).Scan(&other, &otherSource)
		switch {
		case err == nil:
			out = append(out, storage.Suspect{Kind: storage.SuspectCorrelation, Other: other, Source: p.Source, OtherSource: otherSource, Rule: c.Rule})
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("would flag: correlation %s: %w", c.Rule, err)
		}
	}
	return out, nil
}

// FlagsOf returns the forensic flags of delivery id. Returns ErrNotFound if there is no
// such delivery.
func (db *DB) FlagsOf(ctx context.Context, id int64) (storage.DeliveryFlags, error) {
	var f storage.DeliveryFlags
	err := db.pool.QueryRow(ctx, `SELECT money_mismatch FROM deliveries WHERE id = $1`, id).Scan(&f.MoneyMismatch)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("delivery %d: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("flags of delivery %d: %w", id, err)
	}
	by, err := db.SuspectsOf(ctx, []int64{id})
	if err != nil {
		return f, fmt.Errorf("flags of delivery %d: %w", id, err)
	}
	f.Suspects = by[id]
	return f, nil
}
