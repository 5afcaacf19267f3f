package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// Forensics at intake: the doubles that transport deduplication cannot see. Record runs
// these checks in the transaction that claims its rows' keys, in its round trips
// (recordTx): the traces of expired claims taken over and the look-ups of business and
// correlation keys before the claims (queueTraceTakenOver, forensicLookups.queue), the
// decisions once the claims are made (forensicLookups.decide), and the flags and keys
// written with the deliveries (forensicLookups.queueWrites). A flag is committed with
// its delivery, and business_key_blocks turns a delivery into a duplicate before
// anything hands it downstream.
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
// a business or correlation key up holds that key's lock (forensicLookups.queue) from
// before the look-up until its commit: the other waits, then looks, and finds the first.
// One that runs alone (sqlClaimKeyLocks) holds every other recording off instead.
//
// The rows' deliveries are as they are stored (storable): what the checks compare and
// write of them needs no escaping here.

// queueTraceTakenOver queues on b the statement that writes the traces of the expired
// processed claims that rows of ask take over, as the sweep writes those it deletes: a
// delivery of such a key within the remember period is a late duplicate, and the first
// one, the row that takes the claim over, finds its trace as any later one does
// (sqlLateSuspects).
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

// forensicLookups are what a transaction read of its rows' business and correlation
// keys before it claimed them (queue, read), and what it decided from that once the
// claims were made (decide), to be written with the deliveries (queueWrites,
// readWrites). A writer reuses them, transaction after transaction.
type forensicLookups struct {
	// business are the rows that claim a key and have a business key to look up, in
	// order; businessFound the earliest other delivery of each found in the database
	// (0: none), by place.
	business      []*recordRow
	businessFound []int64
	// corr are the correlation keys of the rows that claim a key, in order, and
	// corrFound the earliest delivery of another source of the rule of each found in
	// the database, by place.
	corr      []correlation
	corrFound []corrMatch
	// locks are the ids of the forensic key locks of the rows, sorted and unique, and
	// locked whether queue queued them: not when the transaction holds every intake
	// transaction off because it must (queueClaimKeyLocks). One that does so by choice
	// queues them, and the statement takes none (sqlForensicKeyLocks).
	locks  []int32
	locked bool

	// What decide decided, in the order found.
	mismatch, mismatchFirst []int64 // duplicates to compare, with their first delivery
	unclaim                 []*recordRow
	businessAdd             []*recordRow
	businessFlags           []suspectFlag
	late                    []*recordRow // the accepted rows, checked for traces
	corrAdd                 []correlation
	corrFlags               []suspectFlag
}

// correlation is one correlation key of a row.
type correlation struct {
	r *recordRow
	c storage.CorrelationKey
}

// corrMatch is the delivery, and its source, whose correlation key a row repeats.
type corrMatch struct {
	other  int64
	source string
}

// suspectFlag is a suspect found on a row, written with its delivery.
type suspectFlag struct {
	r           *recordRow
	kind        storage.SuspectKind
	other       int64  // the delivery it doubles, 0 when unknown
	otherSource string // "" for the flagged delivery's own source
	rule        string
}

// hasBusinessKey reports whether r has a business key to look up.
func hasBusinessKey(r *recordRow) bool {
	return r.d.BusinessKey != "" && r.claim.BusinessWindow > 0
}

// sqlForensicKeyLocks takes the forensic key locks $2 ($1: that lock's half), in the
// array's order: unnest yields its elements in order, and each row's lock is taken as
// it comes. None when the transaction runs alone (sqlClaimKeyLocks): the condition,
// of no row, is checked once, before the first.
const sqlForensicKeyLocks = `SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k
WHERE current_setting('` + sqlAloneSetting + `', true) IS DISTINCT FROM 'true'`

// sqlBusinessLookup finds, for each business key ($3, of source $1, received by the
// row of key $2 at $4 less the window), the earliest delivery of the source with that
// business key within the window, under another key than the row's. A delivery swept by
// retention no longer names its key: it counts as another's, as its business key row
// outlived it. "+ 0" keeps the planner off the index of seen times, which would walk
// every key of the window: the index of a 64-bit hash of the hash text, seeded by the
// source (business_keys_hash), finds one key's earliest delivery in one seek, the hash
// text and source compared from the row. The hash text is of the key's fields alone:
// without the source, a look-up would walk every row of that text that other sources
// hold. Only the keys found are answered, by their place in the arrays.
const sqlBusinessLookup = `
SELECT v.i, bk.delivery
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS v(source, key, hash, since, i)
CROSS JOIN LATERAL (SELECT b.delivery FROM business_keys AS b LEFT JOIN deliveries AS d ON d.id = b.delivery
	WHERE hashtextextended(b.hash, hashtext(b.source)) = hashtextextended(v.hash, hashtext(v.source))
		AND b.hash = v.hash AND b.source = v.source
		AND b.seen_at + 0 >= v.since AND coalesce(d.key, '') <> v.key
	ORDER BY b.delivery LIMIT 1) AS bk`

// sqlCorrelationLookup finds, for each correlation key ($1, $2) of a row of source $4,
// the earliest delivery of another source of the rule with that key within the window
// ($3 on), through the index of a 64-bit hash of the hash text, seeded by the rule (as
// sqlBusinessLookup).
const sqlCorrelationLookup = `
SELECT v.i, ck.delivery, ck.source
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) WITH ORDINALITY AS v(rule, hash, since, source, i)
CROSS JOIN LATERAL (SELECT c.delivery, c.source FROM correlation_keys AS c
	WHERE hashtextextended(c.hash, hashtext(c.rule)) = hashtextextended(v.hash, hashtext(v.rule))
		AND c.hash = v.hash AND c.rule = v.rule
		AND c.seen_at + 0 >= v.since AND c.source <> v.source
	ORDER BY c.delivery LIMIT 1) AS ck`

// collect gathers the business and correlation keys of ask, the rows that claim a
// key, and their locks' ids in space, and returns how many locks those are.
func (l *forensicLookups) collect(space lockSpace, ask []*recordRow) int {
	clear(l.business)
	clear(l.corr)
	l.business, l.corr, l.locks = l.business[:0], l.corr[:0], l.locks[:0]
	for _, r := range ask {
		if hasBusinessKey(r) {
			l.business = append(l.business, r)
			l.locks = append(l.locks, space.key(forensicKeyLockID("business", r.d.Source, r.d.BusinessKey)))
		}
		for _, c := range r.d.Correlations {
			l.corr = append(l.corr, correlation{r, c})
			l.locks = append(l.locks, space.key(forensicKeyLockID("correlation", c.Rule, c.Hash)))
		}
	}
	slices.Sort(l.locks)
	l.locks = slices.Compact(l.locks)
	return len(l.locks)
}

// queue queues on b, after the claim key locks and the trace of expired
// claims, the look-ups of the business and correlation keys of ask, the rows that
// claim a key: which of them will be accepted is not known yet, but the look-ups need
// only their keys, so they ride in the transaction's first round trip, and
// decide keeps the answers of the rows accepted. Ahead of them it queues the
// locks of those keys (forensicKeyLockID), all in one order, each held until the
// commit: a recording that looks a key up holds its lock until the key is stored.
//
// Every intake transaction takes its locks in this order: its claim keys' (claimKeyLock),
// then the claims of its keys (the trace), then these, then the claims again (the
// claim statement). A holder of forensic key locks then waits only for claims of its
// own keys, which no other recording can lock while this one holds their key locks,
// and for forensic key locks taken in one order: never in a cycle. A transaction that
// holds the intake-wide lock exclusively (lock false) needs none of them: no other
// recording runs beside it. It queues what collect gathered.
func (l *forensicLookups) queue(b *pgx.Batch, lock bool) {
	l.locked = false
	if len(l.locks) == 0 {
		return
	}
	if lock {
		b.Queue(sqlForensicKeyLocks, int32(forensicKeyLock&0xffffffff), l.locks)
		l.locked = true
	}
	if n := len(l.business); n > 0 {
		sources, keys, hashes, since := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, r := range l.business {
			sources[i], keys[i], hashes[i] = r.d.Source, r.d.Key, r.d.BusinessKey
			since[i] = millis(r.d.ReceivedAt) - r.claim.BusinessWindow.Milliseconds()
		}
		b.Queue(sqlBusinessLookup, sources, keys, hashes, since)
	}
	if n := len(l.corr); n > 0 {
		rules, hashes, since, sources := make([]string, n), make([]string, n), make([]int64, n), make([]string, n)
		for i, p := range l.corr {
			rules[i], hashes[i], sources[i] = p.c.Rule, p.c.Hash, p.r.d.Source
			since[i] = millis(p.r.d.ReceivedAt) - p.c.Window.Milliseconds()
		}
		b.Queue(sqlCorrelationLookup, rules, hashes, since, sources)
	}
}

// release drops the rows that l refers to, once their transaction is over: their
// callers own them again.
func (l *forensicLookups) release() {
	for _, s := range [][]*recordRow{l.business, l.unclaim, l.businessAdd, l.late} {
		clear(s)
	}
	clear(l.corr)
	clear(l.corrAdd)
	clear(l.businessFlags)
	clear(l.corrFlags)
}

// read reads from br the answers of what queue queued.
func (l *forensicLookups) read(br pgx.BatchResults) error {
	if len(l.locks) == 0 {
		return nil
	}
	if l.locked {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock forensic keys: %w", err)
		}
	}
	l.businessFound = append(l.businessFound[:0], make([]int64, len(l.business))...)
	if len(l.business) > 0 {
		res, err := br.Query()
		if err == nil {
			var other int64
			err = readByPlace(res, len(l.business), []any{&other}, func(i int) { l.businessFound[i] = other })
		}
		if err != nil {
			return fmt.Errorf("business keys: %w", err)
		}
	}
	l.corrFound = append(l.corrFound[:0], make([]corrMatch, len(l.corr))...)
	if len(l.corr) > 0 {
		res, err := br.Query()
		if err == nil {
			var m corrMatch
			err = readByPlace(res, len(l.corr), []any{&m.other, &m.source}, func(i int) { l.corrFound[i] = m })
		}
		if err != nil {
			return fmt.Errorf("correlations: %w", err)
		}
	}
	return nil
}

// readByPlace reads the rows of a look-up that answers only what it found: each row a
// place among the n it looked up (1 to n, its arrays' ordinality), then the values
// scanned into dest; set gets the place, counted from 0.
func readByPlace(res pgx.Rows, n int, dest []any, set func(i int)) error {
	var place int64
	_, err := pgx.ForEachRow(res, append([]any{&place}, dest...), func() error {
		if place < 1 || place > int64(n) {
			return fmt.Errorf("row %d of %d", place, n)
		}
		set(int(place) - 1)
		return nil
	})
	return err
}

// decide runs the checks on a transaction's rows (rows: all of them; the looked-up
// ones are those queue had) once their claims are decided, and before their
// deliveries are written: what to flag, what to store, and which rows
// business_key_blocks turns into duplicates, rewritten as such here (block).
//
//   - Money mismatches are compared in SQL, as stored (queueWrites): each duplicate
//     whose payload differs, with the first delivery it lost to.
//   - Business keys: of the accepted rows with one, a row is a double of the delivery
//     found in the database or, failing that, of an earlier row of the transaction
//     with the key, under another key, within the window. Blocked, it is accepted no
//     more and takes no other flag; otherwise its key is stored.
//   - Late duplicates: every row still accepted is looked up in the traces, in SQL,
//     with its insert (queueWrites).
//   - Correlations: likewise, of the rows still accepted, found in the database or
//     earlier in the transaction through another source; all are stored.
func (l *forensicLookups) decide(rows []*recordRow) {
	l.mismatch, l.mismatchFirst = l.mismatch[:0], l.mismatchFirst[:0]
	clear(l.unclaim)
	clear(l.businessAdd)
	clear(l.businessFlags)
	clear(l.late)
	clear(l.corrAdd)
	clear(l.corrFlags)
	l.unclaim, l.businessAdd, l.businessFlags, l.late = l.unclaim[:0], l.businessAdd[:0], l.businessFlags[:0], l.late[:0]
	l.corrAdd, l.corrFlags = l.corrAdd[:0], l.corrFlags[:0]
	for _, r := range rows {
		if r.outcome == storage.Duplicate && r.mismatch {
			l.mismatch, l.mismatchFirst = append(l.mismatch, r.id), append(l.mismatchFirst, r.first)
		}
	}
	type bkey struct{ source, hash string }
	var first map[bkey]*recordRow
	for j, r := range l.business {
		if r.outcome != storage.Accepted {
			continue
		}
		if first == nil {
			first = map[bkey]*recordRow{}
		}
		k := bkey{r.d.Source, r.d.BusinessKey}
		other := l.businessFound[j]
		if e, ok := first[k]; other == 0 && ok && e.d.Key != r.d.Key &&
			r.d.ReceivedAt.Sub(e.d.ReceivedAt) <= r.claim.BusinessWindow {
			other = e.id
		}
		if other != 0 && r.claim.BusinessBlocks {
			l.block(rows, r, other)
			continue
		}
		if other != 0 {
			l.businessFlags = append(l.businessFlags, suspectFlag{r: r, kind: storage.SuspectBusinessKey, other: other})
		}
		if _, ok := first[k]; !ok {
			first[k] = r
		}
		l.businessAdd = append(l.businessAdd, r)
	}
	for _, r := range rows {
		if r.outcome == storage.Accepted {
			l.late = append(l.late, r)
		}
	}
	for j, p := range l.corr {
		if p.r.outcome != storage.Accepted {
			continue
		}
		m := l.corrFound[j]
		for _, e := range l.corrAdd {
			if m.other != 0 {
				break
			}
			if e.c.Rule == p.c.Rule && e.c.Hash == p.c.Hash && e.r.d.Source != p.r.d.Source &&
				p.r.d.ReceivedAt.Sub(e.r.d.ReceivedAt) <= p.c.Window {
				m = corrMatch{e.r.id, e.r.d.Source}
			}
		}
		if m.other != 0 {
			l.corrFlags = append(l.corrFlags, suspectFlag{r: p.r, kind: storage.SuspectCorrelation, other: m.other,
				otherSource: m.source, rule: p.c.Rule})
		}
		l.corrAdd = append(l.corrAdd, p)
	}
}

// block turns r, accepted, into a duplicate of other, the delivery whose business key it
// repeats, before its row is written. Its claim is undone rather than kept (queueWrites):
// a claim says that its first delivery's event was taken in, and this one was not, so
// the keys pages list it nowhere, and a redelivery of its key meets the same business
// key and is blocked the same way (while the window lasts). Rows of the transaction
// that lost their key's claim to r are repointed to other too, as r's redeliveries;
// one that would have stored its body as a reference to r's stores its own, the same
// bytes: the blocked delivery is owed nothing and no longer accepted, so the retention
// sweep deletes it without handing its body over.
func (l *forensicLookups) block(rows []*recordRow, r *recordRow, other int64) {
	l.unclaim = append(l.unclaim, r)
	blocked := r.id
	r.outcome, r.first = storage.Duplicate, other
	for _, o := range rows {
		if o == r {
			continue
		}
		if o.outcome == storage.Duplicate && o.first == blocked {
			o.first = other
		}
		if o.bodyFrom == blocked {
			o.bodyFrom = 0
		}
	}
}

// sqlMaxNumberText is storage.MaxNumberText, in a statement.
var sqlMaxNumberText = strconv.Itoa(storage.MaxNumberText)

// sqlMaxPlainAmount is the length of the longest storage.PlainAmount: a sign, the whole
// digits, a point and the fraction's digits.
var sqlMaxPlainAmount = strconv.Itoa(1 + storage.MaxAmountWhole + 1 + storage.MaxAmountFrac)

// sqlPlainAmount is the condition that the text col is a storage.PlainAmount: a plain
// decimal, within its bounds (storage.MaxAmountWhole, storage.MaxAmountFrac). The
// bounds are counted with length, not written as repetitions in the pattern: PostgreSQL
// compiles [0-9]{1,200} into an automaton of hundreds of states, which took about 100 µs
// a value where the pattern below takes well under one, and the dashboard and the
// roll-up of its totals test every delivery's amount. Once the pattern holds, the text
// is ASCII, so length counts digits. The pattern holds no backslash: with
// standard_conforming_strings off a literal's backslash is an escape, "\\." would match
// any character, and text such as "1x5" would reach the cast. The length comes first,
// so that text longer than any plain amount (an import may hold megabytes) is never
// matched against the pattern: an AND in an expression stops at its first false.
func sqlPlainAmount(col string) string {
	return "(length(" + col + ") <= " + sqlMaxPlainAmount +
		" AND " + col + " ~ '^-?[0-9]+([.][0-9]+)?$'" +
		" AND length(split_part(ltrim(" + col + ", '-'), '.', 1)) <= " + strconv.Itoa(storage.MaxAmountWhole) +
		" AND length(split_part(" + col + ", '.', 2)) <= " + strconv.Itoa(storage.MaxAmountFrac) + ")"
}

// The statement that writes money mismatches, built with storage's bounds.
var (
	// sqlMoneyMismatches flags the duplicates $1 whose amount, currency or event status
	// differs from that of the first delivery each lost to ($2), compared as stored, the
	// amounts as storage.SameAmount compares them: two numbers of the same value
	// are the same amount. The CASE keeps the casts behind the patterns that make them
	// safe. A first delivery swept by retention has nothing to compare with.
	sqlMoneyMismatches = `UPDATE deliveries AS d SET money_mismatch = true
FROM unnest($1::bigint[], $2::bigint[]) AS v(id, first)
JOIN deliveries AS f ON f.id = v.first
WHERE d.id = v.id AND (f.currency <> d.currency OR f.event_status <> d.event_status OR (f.amount <> d.amount AND
	CASE WHEN (` + sqlPlainAmount("f.amount") + ` OR (length(f.amount) <= ` + sqlMaxNumberText + ` AND f.amount ~ '` + sqlExponentAmount + `'))
		AND (` + sqlPlainAmount("d.amount") + ` OR (length(d.amount) <= ` + sqlMaxNumberText + ` AND d.amount ~ '` + sqlExponentAmount + `'))
	THEN f.amount::numeric <> d.amount::numeric ELSE true END))
RETURNING d.id`

	// sqlExponentAmount is a plain decimal with an exponent within
	// storage.MaxNumberExp, which storage.SameAmount reads as a number as it reads a
	// plain one (with the length bound sqlMaxNumberText). No backslash, as above.
	sqlExponentAmount = `^-?[0-9]+([.][0-9]+)?[eE][-+]?0*([0-9]|[1-3][0-9]|40)$`
)

// The statements that write what decide decided, after the deliveries' insert.
const (
	// sqlUnclaim undoes the claims ($1, $2) that the blocked deliveries $3 won.
	sqlUnclaim = `DELETE FROM claims AS c
USING unnest($1::text[], $2::text[], $3::bigint[]) AS v(source, key, first)
WHERE c.source = v.source AND c.key = v.key AND c.first_delivery = v.first`

	// sqlInsertBusinessKeys and sqlInsertCorrelationKeys store the keys of accepted
	// deliveries: one business key a delivery, and one correlation key a rule of it
	// (queueWrites stores a repeated one once).
	sqlInsertBusinessKeys = `INSERT INTO business_keys (source, hash, delivery, seen_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])`

	sqlInsertCorrelationKeys = `INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])`

	// sqlSuspects writes suspects found, in order. What a suspect repeats of its
	// delivery (source, property, booking, amount, currency, when it was received) is
	// read from the delivery's row, as stored.
	sqlSuspects = `INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at)
SELECT v.kind, d.id, v.other, d.source, CASE WHEN v.other_source = '' THEN d.source ELSE v.other_source END, v.rule,
	d.property, d.booking, d.amount, d.currency, 0, d.received_at
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[])
	WITH ORDINALITY AS v(kind, delivery, other, other_source, rule, i)
JOIN deliveries AS d ON d.id = v.delivery
ORDER BY v.i`

	// sqlLateSuspects flags each delivery ($1, in order) whose key ($2, $3) has a trace
	// (one left by the sweep, or by sqlTraceTakenOver of the claim the row took over),
	// and returns the deliveries flagged.
	sqlLateSuspects = `INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at)
SELECT 'late_duplicate', d.id, CASE WHEN EXISTS (SELECT 1 FROM deliveries AS f WHERE f.id = t.first_delivery)
	THEN t.first_delivery ELSE 0 END, d.source, d.source, '', d.property, d.booking, d.amount, d.currency,
	t.first_seen, d.received_at
FROM unnest($1::bigint[], $2::text[], $3::bytea[]) WITH ORDINALITY AS v(delivery, source, hash, i)
JOIN key_traces AS t ON t.source = v.source AND t.key_hash = v.hash
JOIN deliveries AS d ON d.id = v.delivery
ORDER BY v.i
RETURNING delivery`
)

// queueWrites queues on b, after the statement that inserts the transaction's rows,
// the writes that decide decided: the money mismatches, the claims undone, the
// business and correlation keys stored, and the suspects, in the order the checks
// find them (business keys, late duplicates, correlations).
func (l *forensicLookups) queueWrites(b *pgx.Batch) {
	if len(l.mismatch) > 0 {
		b.Queue(sqlMoneyMismatches, l.mismatch, l.mismatchFirst)
	}
	if n := len(l.unclaim); n > 0 {
		sources, keys, ids := make([]string, n), make([]string, n), make([]int64, n)
		for i, r := range l.unclaim {
			sources[i], keys[i], ids[i] = r.d.Source, r.d.Key, r.id
		}
		b.Queue(sqlUnclaim, sources, keys, ids)
	}
	if n := len(l.businessAdd); n > 0 {
		sources, hashes, ids, seen := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n)
		for i, r := range l.businessAdd {
			sources[i], hashes[i] = r.d.Source, r.d.BusinessKey
			ids[i], seen[i] = r.id, millis(r.d.ReceivedAt)
		}
		b.Queue(sqlInsertBusinessKeys, sources, hashes, ids, seen)
	}
	if n := len(l.corrAdd); n > 0 {
		rules, hashes, sources, ids, seen := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		for i, p := range l.corrAdd {
			if repeated(l.corrAdd[:i], p) {
				continue
			}
			rules, hashes, sources = append(rules, p.c.Rule), append(hashes, p.c.Hash), append(sources, p.r.d.Source)
			ids, seen = append(ids, p.r.id), append(seen, millis(p.r.d.ReceivedAt))
		}
		b.Queue(sqlInsertCorrelationKeys, rules, hashes, sources, ids, seen)
	}
	queueSuspects(b, l.businessFlags)
	if n := len(l.late); n > 0 {
		ids, sources, hashes := make([]int64, n), make([]string, n), make([][]byte, n)
		for i, r := range l.late {
			ids[i], sources[i], hashes[i] = r.id, r.d.Source, storage.KeyHash(r.d.Key)
		}
		b.Queue(sqlLateSuspects, ids, sources, hashes)
	}
	queueSuspects(b, l.corrFlags)
}

// repeated reports whether before, correlation keys to store, ends with p's row's and
// holds p's rule and hash for it already: a source with two rules of one name. A row's
// keys are stored one after the other.
func repeated(before []correlation, p correlation) bool {
	for i := len(before) - 1; i >= 0 && before[i].r == p.r; i-- {
		if before[i].c.Rule == p.c.Rule && before[i].c.Hash == p.c.Hash {
			return true
		}
	}
	return false
}

// queueSuspects queues on b the statement that writes flags, if there are any.
func queueSuspects(b *pgx.Batch, flags []suspectFlag) {
	n := len(flags)
	if n == 0 {
		return
	}
	kinds, otherSources, rules := make([]string, n), make([]string, n), make([]string, n)
	ids, others := make([]int64, n), make([]int64, n)
	for i, f := range flags {
		kinds[i], otherSources[i], rules[i] = string(f.kind), f.otherSource, f.rule
		ids[i], others[i] = f.r.id, f.other
	}
	b.Queue(sqlSuspects, kinds, ids, others, otherSources, rules)
}

// readWrites reads from br the answers of what queueWrites queued, and sets the rows'
// flags: each row's suspects in the order the checks find them.
func (l *forensicLookups) readWrites(br pgx.BatchResults, rows []*recordRow) error {
	var byID map[int64]*recordRow
	find := func(id int64) (*recordRow, error) {
		if byID == nil {
			byID = make(map[int64]*recordRow, len(rows))
			for _, r := range rows {
				byID[r.id] = r
			}
		}
		if r := byID[id]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("flagged delivery %d, which is not in the transaction", id)
	}
	if len(l.mismatch) > 0 {
		res, err := br.Query()
		if err == nil {
			var id int64
			_, err = pgx.ForEachRow(res, []any{&id}, func() error {
				r, err := find(id)
				if err == nil {
					r.moneyMismatch = true
				}
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("money mismatch: %w", err)
		}
	}
	for _, q := range []struct {
		what string
		n    int
	}{{"block", len(l.unclaim)}, {"business keys", len(l.businessAdd)}, {"correlations", len(l.corrAdd)},
		{"flag suspects", len(l.businessFlags)}} {
		if q.n > 0 {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", q.what, err)
			}
		}
	}
	for _, f := range l.businessFlags {
		f.r.suspects = append(f.r.suspects, f.kind)
	}
	if len(l.late) > 0 {
		res, err := br.Query()
		if err == nil {
			var id int64
			_, err = pgx.ForEachRow(res, []any{&id}, func() error {
				r, err := find(id)
				if err == nil {
					r.suspects = append(r.suspects, storage.SuspectLateDuplicate)
				}
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("late duplicates: %w", err)
		}
	}
	if len(l.corrFlags) > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("flag suspects: %w", err)
		}
	}
	for _, f := range l.corrFlags {
		f.r.suspects = append(f.r.suspects, f.kind)
	}
	return nil
}

// forensicKeyLockID is the second half of the lock of one business key (of a source),
// correlation key (of a rule) or claim (of a source). Two keys may share one: they then
// wait on each other for nothing worse than a moment.
//
// It is FNV-1a (32 bits) of the three strings, each followed by a zero byte, computed
// here rather than through hash/fnv, whose Write takes each string as a new []byte: a
// few allocations for each key of every transaction. Replicas of any version must agree
// on it, so it stays FNV-1a.
func forensicKeyLockID(kind, scope, hash string) int32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for _, s := range [...]string{kind, scope, hash} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint32(s[i])) * prime
		}
		h *= prime // a zero byte: h ^ 0 is h
	}
	return int32(h)
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
		if mine, err := db.tryLock(ctx, tx, lock); err != nil || !mine {
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
	// The business key and correlations are looked up by intake's own statements, so
	// that the key lab sees what intake would, through the same index.
	if p.BusinessKey != "" && p.BusinessWindow > 0 {
		res, err := db.pool.Query(ctx, sqlBusinessLookup, []string{source}, []string{key},
			[]string{textSafe(p.BusinessKey)}, []int64{at - p.BusinessWindow.Milliseconds()})
		if err == nil {
			var other int64
			err = readByPlace(res, 1, []any{&other}, func(int) {
				out = append(out, storage.Suspect{Kind: storage.SuspectBusinessKey, Other: other, Source: p.Source, OtherSource: p.Source})
			})
		}
		if err != nil {
			return nil, fmt.Errorf("would flag: business key: %w", err)
		}
	}
	if p.Key != "" && storable {
		var first, claimedAt, expiresAt int64
		// A first delivery that retention swept is linked to nothing, as intake links it
		// when it takes the claim over.
		err := db.pool.QueryRow(ctx, `SELECT CASE WHEN EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = c.first_delivery)
	THEN c.first_delivery ELSE 0 END, c.claimed_at, c.expires_at FROM claims AS c
WHERE c.source = $1 AND c.key = $2 AND c.state = 'processed'`, source, key).Scan(&first, &claimedAt, &expiresAt)
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
	if n := len(p.Correlations); n > 0 {
		rules, hashes, since, sources := make([]string, n), make([]string, n), make([]int64, n), make([]string, n)
		for i, c := range p.Correlations {
			rules[i], hashes[i], since[i], sources[i] = textSafe(c.Rule), textSafe(c.Hash), at-c.Window.Milliseconds(), source
		}
		found := make([]*storage.Suspect, n)
		res, err := db.pool.Query(ctx, sqlCorrelationLookup, rules, hashes, since, sources)
		if err == nil {
			var m corrMatch
			err = readByPlace(res, n, []any{&m.other, &m.source}, func(i int) {
				found[i] = &storage.Suspect{Kind: storage.SuspectCorrelation, Other: m.other, Source: p.Source, OtherSource: m.source, Rule: p.Correlations[i].Rule}
			})
		}
		if err != nil {
			return nil, fmt.Errorf("would flag: correlations: %w", err)
		}
		for _, f := range found {
			if f != nil {
				out = append(out, *f)
			}
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
