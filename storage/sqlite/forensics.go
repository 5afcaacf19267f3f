package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// Forensics at intake: the doubles that transport deduplication cannot see. The writer
// runs these checks in the transaction that claims a batch's keys, so that a flag is
// committed with its delivery, and business_key_blocks can turn a delivery into a
// duplicate before anything hands it downstream.
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
// Each suspected pair is one suspects row, on the later delivery, naming the earlier one
// in other: the earlier delivery finds it through the suspects_other index, and one row
// is one decision for a reviewer, and counts the money at stake once.
//
// The business and correlation keys of accepted deliveries are appended to
// forensic_keys_pending, which has no index, and the writer keeps in memory where in it
// each key may be: the rowids of the pending rows by the key's hash (pendingRows), read
// again from the table whenever it may have changed behind the writer's back (another
// connection's commit, a rolled-back batch). Lookups read the indexed tables, and the
// pending rows at those rowids, each checked against the key: a rowid may be stale (a
// row deleted by a release or a sweep, its rowid reused), never missing. Once flushAt
// keys are pending they are moved into business_keys and correlation_keys in one
// statement each: inserted one batch at a time, each key dirtied a leaf page of its
// table's hash index, a page of the write-ahead log written and checkpointed for a few
// bytes. Those tables are found by the day a key was seen and the first 8 bytes of its
// hash (storedHash, keyDays): an entry of their hash indexes is the day, that prefix
// and the row's id, some 18 bytes; a move's entries land among their day's, and the
// rows and their seen times are appended.

// holderKey names a claim: its source and key.
type holderKey struct{ source, key string }

// priorClaim is a processed claim that one of a batch's rows may take over: if the row
// wins it, that claim had expired, and its key is traced.
type priorClaim struct {
	first     int64
	claimedAt int64
	expiresAt int64
}

// forensics is the writer's state for the checks of one batch. Its statements run on
// the write connection, in the batch's transaction, as the writer's own do
// (batchWriter).
type forensics struct {
	prior map[holderKey]priorClaim
	acc   []*recordRow
	keys  []forensicKey
	look  []*forensicKey
	corr  []*forensicKey
	add   []*forensicKey
	ready bool      // prepare has run
	conn  *sql.Conn // the batch's, while after runs

	// pendingRows, the rowids of the pending keys by their filterHash, was loaded when
	// the write connection's data_version was version: another connection that commits
	// (another process) may have added or moved pending keys since, and it is loaded
	// again. It has every pending key's rowid, and may have more.
	pendingRows pendingIndex
	loaded      bool
	version     int64
	// pending counts the keys appended since the pending table was last emptied; a
	// transaction that rolls back has it counted again with the copy (current).
	pending int
	// nextRowid is the rowid the next pending key is stored under: above every rowid
	// the table held when it was loaded, and every one the writer has given since. The
	// writer numbers the keys itself, so that storing a batch's keys returns nothing.
	nextRowid int64
	args      []any // the arguments of the statement that stores pending keys, reused

	// The filter of the keys the database may hold (keyfilter.go), complete as of the
	// write connection's data_version filterAt; nil until built, and while another
	// connection's commit has it built again. It is built on read, until closing.
	filter   *keyFilter
	filterAt int64
	build    *filterBuild
	read     *sql.DB
	closing  <-chan struct{}
	adopted  *atomic.Int64
	traced   *tracedKeys // the traces other writes on the write connection noted
	late     []lateLook  // the rows whose traces lateDuplicates looks up, reused
	// The data_version of the last check, and when one last found that another
	// connection had committed (filterQuiet).
	checked   bool
	checkedAt int64
	foreignAt time.Time
}

// flushAt is how many pending keys the writer lets pile up before it moves them into
// the indexed tables. A move of n keys dirties at most one leaf page per key, and no
// more than the index has: the more at once, the fewer pages per key, the longer the
// one transaction that moves them (a few milliseconds a thousand keys). Tests lower it.
var flushAt = 4096

const (
	// An empty temporary table marks the write connection the writer's memory of the
	// pending keys is for: a connection made anew has none, and its data_version says
	// nothing of the old one's.
	sqlWriterMark = `CREATE TEMP TABLE IF NOT EXISTS forensic_writer (unused)`
	// The write connection's data_version, and whether its mark exists.
	sqlRecentCheck = `SELECT data_version, EXISTS (SELECT 1 FROM temp.sqlite_master WHERE name = 'forensic_writer')
FROM pragma_data_version`
	sqlPendingLoad = `SELECT rowid, rule, source, hash FROM forensic_keys_pending`
)

// sqlFlush moves the pending keys into the indexed tables. The delete that empties the
// pending table is one step: the table has no index and no trigger.
// They are moved in the order they were stored, the order of the tables' rows and of
// their seen times: the entries of the hash indexes, a few bytes each, land where they
// land in either order.
var sqlFlush = []string{
	`INSERT OR IGNORE INTO business_keys (delivery, source, hash, seen_at)
	SELECT delivery, source, hash, seen_at FROM forensic_keys_pending WHERE rule = ''`,
	`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
	SELECT rule, hash, source, delivery, seen_at FROM forensic_keys_pending WHERE rule != ''`,
	`DELETE FROM forensic_keys_pending`,
}

// prepare takes what the checks need of owner, once.
func (f *forensics) prepare(owner *DB) {
	if f.ready {
		return
	}
	f.read, f.closing, f.adopted, f.traced = owner.read, owner.closing, &owner.keyFilters, &owner.traced
	f.ready = true
}

// current makes the writer's memory of the pending keys hold every one that tx, the
// batch's transaction, sees: loaded again for a connection made anew, or when another
// connection has committed since it was loaded. It looks inside the transaction, once
// it holds the write lock: a look before the begin would miss what another process
// commits in between, such as the release command's transaction that the begin waited
// for. If tx rolls back, it is loaded again (rolledBack): a flush rolled back puts
// back keys the writer forgot.
func (f *forensics) current(ctx context.Context, conn *sql.Conn) error {
	var version int64
	var exists bool
	if err := conn.QueryRowContext(ctx, sqlRecentCheck).Scan(&version, &exists); err != nil {
		return fmt.Errorf("check pending keys: %w", err)
	}
	f.checkFilter(exists, version)
	if exists && f.loaded && version == f.version {
		return nil
	}
	f.loaded = false
	if !exists {
		if _, err := conn.ExecContext(ctx, sqlWriterMark); err != nil {
			return fmt.Errorf("load pending keys: %w", err)
		}
	}
	f.pendingRows.reset()
	f.pending, f.nextRowid = 0, 1
	rows, err := conn.QueryContext(ctx, sqlPendingLoad)
	if err != nil {
		return fmt.Errorf("load pending keys: %w", err)
	}
	defer rows.Close()
	var rowid int64
	var rule, source, hash sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&rowid, &rule, &source, &hash); err != nil {
			return fmt.Errorf("load pending keys: %w", err)
		}
		h := filterHashBytes(rule, source, hash)
		f.pendingRows.add(h, rowid)
		f.pending++
		f.nextRowid = max(f.nextRowid, rowid+1)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load pending keys: %w", err)
	}
	f.loaded, f.version = true, version
	return nil
}

// rolledBack says that the batch's transaction rolled back: the pending keys are loaded
// again.
func (f *forensics) rolledBack() { f.loaded = false }

// close waits for a filter build still reading.
func (f *forensics) close() {
	// A build still reading gave up when closing was closed; it must have ended its
	// read transaction before Close closes the connections: while it lasts, the last
	// of them to close cannot fold the WAL into the file and remove it and the -shm,
	// and the build's own connection, closed after Close returned, outlives whatever
	// the caller does next with the file (a restore over it, removing its directory).
	if f.build != nil {
		<-f.build.done
		f.build = nil
	}
}

// sqlPriorBySize holds sqlPrior for each chunk size.
var sqlPriorBySize = sizedSQL(sqlPrior)

// sqlPrior reads the processed claims held on a chunk's keys: the ones a row of it can
// take over only because they have expired.
func sqlPrior(rows int) string {
	return rowsSQL(`SELECT source, key, first_delivery, claimed_at, expires_at FROM claims
WHERE state = 'processed' AND (source, key) IN (VALUES `, "(?, ?)", ")", rows)
}

// sqlAnyExpired says whether a processed claim has expired by ?1, through the claims
// sweep's index (whose released claims make it say yes more often, never less).
const sqlAnyExpired = `SELECT EXISTS (SELECT 1 FROM claims WHERE state IN ('processed', 'released') AND expires_at <= ?1)`

// before reads, ahead of the claims of ask, the processed claims they may take over: the
// claim statement overwrites such a row, and its trace is written from what is read here.
// Only an expired claim can be taken over: while none has expired by the latest time of
// ask (a database the claims sweep keeps up with), there is nothing to read.
func (f *forensics) before(ctx context.Context, conn *sql.Conn, ask []*recordRow) error {
	if f.prior == nil {
		f.prior = make(map[holderKey]priorClaim)
	}
	clear(f.prior)
	if len(ask) == 0 {
		return nil
	}
	latest := millis(ask[0].d.ReceivedAt)
	for _, r := range ask[1:] {
		latest = max(latest, millis(r.d.ReceivedAt))
	}
	var expired bool
	if err := conn.QueryRowContext(ctx, sqlAnyExpired, latest).Scan(&expired); err != nil {
		return fmt.Errorf("read prior claims: %w", err)
	}
	if !expired {
		return nil
	}
	var args []any
	return chunks(ask, func(chunk []*recordRow) error {
		args = args[:0]
		for _, r := range chunk {
			args = append(args, r.d.Source, r.d.Key)
		}
		q, err := sqlPriorBySize.of(len(chunk))
		if err != nil {
			return fmt.Errorf("read prior claims: %w", err)
		}
		rows, err := conn.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("read prior claims: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k holderKey
			var p priorClaim
			if err := rows.Scan(&k.source, &k.key, &p.first, &p.claimedAt, &p.expiresAt); err != nil {
				return fmt.Errorf("read prior claims: %w", err)
			}
			f.prior[k] = p
		}
		return rows.Err()
	})
}

func (f *forensics) exec(ctx context.Context, q string, args ...any) error {
	_, err := f.conn.ExecContext(ctx, q, args...)
	return err
}

func (f *forensics) queryRow(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	err := f.conn.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (f *forensics) done() { f.conn = nil }

// The business and correlation keys' tables are indexed by the day each key was seen
// (sqlKeyDay), then by its hash's first 8 bytes (migrations/0041_forensic_key_days.sql):
// a key moved in lands among its day's, not anywhere in the window's. A look-up seeks
// in each day that the table holds keys of, from its window's first on: days(day), a
// recursive table that finds each next day by one seek, and ends with a NULL. A key
// seen on a day ahead of the clock (a clock set back since) is found as any other.
//
// sqlKeyDay is written here as in the indexes: SQLite uses an index on an expression
// only where a query writes that expression alike.
const (
	sqlDayMillis = `86400000`
	sqlKeyDay    = `seen_at / ` + sqlDayMillis
)

// keyDays is the days table of the keys of table, from the day of since (an SQL
// expression) on.
func keyDays(table, since string) string {
	next := func(cmp, from string) string {
		return `(SELECT ` + sqlKeyDay + ` FROM ` + table + ` WHERE ` + sqlKeyDay + ` ` + cmp + ` ` + from +
			` ORDER BY ` + sqlKeyDay + ` LIMIT 1)`
	}
	return `days(day) AS (SELECT ` + next(">=", since+` / `+sqlDayMillis) + `
	UNION ALL SELECT ` + next(">", "days.day") + ` FROM days WHERE days.day IS NOT NULL)`
}

const (
	sqlFirstMoney = `SELECT amount, currency, event_status FROM deliveries WHERE id = ?`
	sqlSetMoney   = `UPDATE deliveries SET money_mismatch = 1 WHERE id = ?`

	sqlTraceFind = `SELECT t.first_seen, CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.id = t.first_delivery)
	THEN t.first_delivery ELSE 0 END FROM key_traces t WHERE t.source = ? AND t.key_hash = ?`

	sqlBlockDelivery = `UPDATE deliveries SET outcome = 'duplicate', first_delivery = ?2 WHERE id = ?1`
	sqlBlockClaim    = `DELETE FROM claims WHERE source = ? AND key = ? AND first_delivery = ?`
	sqlRepoint       = `UPDATE deliveries SET first_delivery = ?2 WHERE id = ?1`
	sqlOwnBody       = `UPDATE deliveries SET body = ?2, body_from = 0 WHERE id = ?1`

	sqlTraceAdd = `INSERT OR REPLACE INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at) VALUES (?, ?, ?, ?, ?)`

	sqlDeliveryExists = `SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = ?)`

	sqlSuspectAdd = `INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

var (
	// One delivery's lookups, as the multi-row statements make them (WouldFlag).
	// The key lab's: the pending keys (p), a few thousand at most and without an index,
	// are read through. The earliest of both tables is the match (min's row gives the
	// source); none, no row.
	sqlBusinessMatch = `SELECT delivery FROM (SELECT min(delivery) AS delivery FROM (
SELECT (WITH RECURSIVE ` + keyDays("business_keys", "?3") + `
SELECT min(bk.delivery) FROM days CROSS JOIN business_keys bk
	ON bk.` + sqlKeyDay + ` = days.day AND substr(bk.hash, 1, 8) = substr(?2, 1, 8)
	LEFT JOIN deliveries d ON d.id = bk.delivery
	WHERE bk.hash = ?2 AND bk.source = ?1 AND +bk.seen_at >= ?3 AND coalesce(d.key, '') != ?4) AS delivery
UNION ALL
SELECT p.delivery FROM forensic_keys_pending p LEFT JOIN deliveries d ON d.id = p.delivery
	WHERE p.rule = '' AND p.source = ?1 AND p.hash = ?2 AND p.seen_at >= ?3 AND coalesce(d.key, '') != ?4))
WHERE delivery IS NOT NULL`
	sqlCorrelationMatch = `SELECT delivery, source FROM (SELECT min(delivery) AS delivery, source FROM (
SELECT delivery, source FROM (WITH RECURSIVE ` + keyDays("correlation_keys", "?3") + `
SELECT ck.delivery, ck.source FROM days CROSS JOIN correlation_keys ck
	ON ck.` + sqlKeyDay + ` = days.day AND substr(ck.hash, 1, 8) = substr(?2, 1, 8)
	WHERE ck.hash = ?2 AND ck.rule = ?1 AND +ck.seen_at >= ?3 AND ck.source != ?4)
UNION ALL
SELECT p.delivery, p.source FROM forensic_keys_pending p WHERE p.rule = ?1 AND p.hash = ?2 AND p.seen_at >= ?3 AND p.source != ?4))
WHERE delivery IS NOT NULL`
)

// The multi-row statements of the checks: each takes a chunk of rows at once, as the
// writer's own do, so that a batch costs a few statements rather than several per
// delivery. Each lookup's values carry the row's place in its chunk (i).
type multiKind int

const (
	multiTraceFind multiKind = iota
	multiKeyFind
	multiKeyAdd
	nMulti
)

var multiParts = [nMulti]struct{ head, row, tail string }{
	multiTraceFind: {`WITH v(i, source, hash) AS (VALUES `, `(?, ?, ?)`, `)
SELECT v.i, t.first_seen, CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.id = t.first_delivery)
	THEN t.first_delivery ELSE 0 END
FROM v JOIN key_traces t ON t.source = v.source AND t.key_hash = v.hash`},
	// For each business key (rule ''), the earliest accepted delivery of its source with
	// it within the window, under another key; for each correlation key, the earliest
	// delivery of another source of the rule with it within the window. Each among the
	// indexed keys and among the pending ones: a key may have two answers, and the
	// earlier counts. Rows with a negative i pad the chunk. A delivery swept by
	// retention no longer names its key: it counts as another's, as its business key
	// row outlived it.
	// The pending keys are read at the rowids the writer has for the key (pending, a
	// JSON array; "[]" for none), each row checked against the key.
	multiKeyFind: {`WITH v(i, rule, hash, since, source, key, pending) AS (VALUES `, `(?, ?, ?, ?, ?, ?, ?)`, `)
SELECT v.i, (WITH RECURSIVE ` + keyDays("business_keys", "v.since") + `
	SELECT min(bk.delivery) FROM days CROSS JOIN business_keys bk
		ON bk.` + sqlKeyDay + ` = days.day AND substr(bk.hash, 1, 8) = substr(v.hash, 1, 8)
		LEFT JOIN deliveries d ON d.id = bk.delivery
	WHERE bk.hash = v.hash AND bk.source = v.source AND +bk.seen_at >= v.since AND coalesce(d.key, '') != v.key), v.source
FROM v WHERE v.rule = '' AND v.i >= 0
UNION ALL
SELECT v.i, (SELECT min(p.delivery) FROM forensic_keys_pending p LEFT JOIN deliveries d ON d.id = p.delivery
	WHERE p.rowid IN (SELECT value FROM json_each(v.pending)) AND p.rule = '' AND p.hash = v.hash AND p.source = v.source
		AND p.seen_at >= v.since AND coalesce(d.key, '') != v.key), v.source
FROM v WHERE v.rule = '' AND v.i >= 0 AND v.pending != '[]'
UNION ALL
SELECT v.i, ck.delivery, ck.source FROM v JOIN correlation_keys ck
	ON ck.rowid = (WITH RECURSIVE ` + keyDays("correlation_keys", "v.since") + `
		SELECT rowid FROM (SELECT c2.rowid AS rowid, min(c2.delivery) FROM days CROSS JOIN correlation_keys c2
			ON c2.` + sqlKeyDay + ` = days.day AND substr(c2.hash, 1, 8) = substr(v.hash, 1, 8)
		WHERE c2.hash = v.hash AND c2.rule = v.rule AND +c2.seen_at >= v.since AND c2.source != v.source))
WHERE v.rule != ''
UNION ALL
SELECT v.i, p.delivery, p.source FROM v JOIN forensic_keys_pending p
	ON p.rowid = (SELECT rowid FROM (SELECT p2.rowid AS rowid, min(p2.delivery) FROM forensic_keys_pending p2
		WHERE p2.rowid IN (SELECT value FROM json_each(v.pending))
		AND p2.rule = v.rule AND p2.hash = v.hash AND p2.seen_at >= v.since AND p2.source != v.source))
WHERE v.rule != '' AND v.pending != '[]'`},
	// Rows whose delivery is NULL pad the chunk. Each key comes with its rowid.
	multiKeyAdd: {`INSERT INTO forensic_keys_pending (rowid, rule, hash, source, delivery, seen_at)
SELECT column1, column2, column3, column4, column5, column6 FROM (VALUES `, `(?, ?, ?, ?, ?, ?)`, `) WHERE column5 IS NOT NULL`},
}

// multiSQL is the statement of kind k for rows rows.
func multiSQL(k multiKind, rows int) string {
	p := multiParts[k]
	return rowsSQL(p.head, p.row, p.tail, rows)
}

// multiQueries are all the multi-row statements, by kind.
var multiQueries = func() (q [nMulti]bySize) {
	for k := range nMulti {
		q[k] = sizedSQL(func(rows int) string { return multiSQL(k, rows) })
	}
	return q
}()

// multi is the statement of kind k for n rows.
func multi(k multiKind, n int) (string, error) { return multiQueries[k].of(n) }

// chunked calls f with consecutive chunks of xs, each of a size in chunkSizes, and the
// place of the chunk's first element in xs.
func chunked[T any](xs []T, f func(off int, chunk []T) error) error {
	off := 0
	return chunks(xs, func(chunk []T) error {
		err := f(off, chunk)
		off += len(chunk)
		return err
	})
}

// after runs the checks on a batch's rows once their claims are made and their
// deliveries inserted, in the same transaction, and sets each row's flags. A row that
// business_key_blocks turns into a duplicate is rewritten as one here: outcome
// duplicate, its first delivery the one it doubles, and its claim undone (see block).
func (f *forensics) after(ctx context.Context, conn *sql.Conn, rows []*recordRow) error {
	f.conn = conn
	defer f.done()
	// Money mismatches are rare (the payload differs): a statement or two each.
	for i, r := range rows {
		if r.outcome == storage.Duplicate && r.mismatch {
			if err := f.moneyMismatch(ctx, rows[:i], r); err != nil {
				return fmt.Errorf("money mismatch: %w", err)
			}
		}
	}
	acc := f.acc[:0]
	for _, r := range rows {
		if r.outcome == storage.Accepted {
			acc = append(acc, r)
		}
	}
	f.acc = acc
	defer clear(f.acc)
	if len(acc) == 0 {
		return nil
	}
	// Every key is looked up at once, then business keys first: a blocked row is
	// accepted no more, and takes no other flag (its correlations' matches go unused).
	f.keys = keysOf(f.keys[:0], acc)
	defer clear(f.keys)
	// Only the keys the database may hold are looked up: most are new.
	look := f.look[:0]
	for i := range f.keys {
		k := &f.keys[i]
		if f.mayMatch(k.filterHash) {
			look = append(look, k)
		}
	}
	f.look = look
	defer clear(f.look)
	if err := f.lookUp(ctx, look); err != nil {
		return fmt.Errorf("look up business and correlation keys: %w", err)
	}
	if err := f.businessKeys(ctx, rows, f.keys); err != nil {
		return fmt.Errorf("business keys: %w", err)
	}
	if err := f.lateDuplicates(ctx, acc); err != nil {
		return fmt.Errorf("late duplicates: %w", err)
	}
	if err := f.correlations(ctx, f.keys); err != nil {
		return fmt.Errorf("correlations: %w", err)
	}
	if err := f.store(ctx, f.keys); err != nil {
		return fmt.Errorf("store business and correlation keys: %w", err)
	}
	if f.pending >= flushAt {
		if err := f.flush(ctx); err != nil {
			return fmt.Errorf("move pending keys: %w", err)
		}
	}
	return nil
}

// flush moves the pending keys into the indexed tables, in the batch's transaction.
func (f *forensics) flush(ctx context.Context) error {
	for _, q := range sqlFlush {
		if err := f.exec(ctx, q); err != nil {
			return err
		}
	}
	f.pending = 0
	f.pendingRows.reset()
	return nil
}

// moneyMismatch flags r, a duplicate whose payload differs from its first delivery's,
// when the amount, the currency or the event status differ too. The first delivery is
// among earlier (earlier rows of the batch) or stored before it.
func (f *forensics) moneyMismatch(ctx context.Context, earlier []*recordRow, r *recordRow) error {
	var first storage.MoneyTerms
	found := false
	for _, e := range earlier {
		if e.id == r.first {
			first, found = e.d.MoneyTerms(), true
			break
		}
	}
	if !found {
		ok, err := f.queryRow(ctx, sqlFirstMoney, []any{r.first}, &first.Amount, &first.Currency, &first.Status)
		if err != nil || !ok {
			return err // a first delivery swept by retention has nothing to compare with
		}
	}
	if first.Same(r.d.MoneyTerms()) {
		return nil
	}
	r.moneyMismatch = true
	return f.exec(ctx, sqlSetMoney, r.id)
}

// forensicKey is one key of an accepted row of the batch, and the earliest match the
// database holds for it.
type forensicKey struct {
	r *recordRow
	preparedKey
	other        int64  // the match's delivery, 0 for none
	otherSource  string // and its source
	wantsStoring bool
}

// preparedKey is a row's business key (rule "") or one of its correlation keys, with
// what the writer's checks match it by.
type preparedKey struct {
	rule, hash string
	window     time.Duration
	stored     any    // hash as stored (storedHash)
	filterHash uint64 // its hash in the writer's filter
}

// forensicPrep is what the writer's checks need of a row that depends on its delivery
// alone: its keys as stored and as the filter hashes them, and the hash of its claim's
// key for the traces. Record's caller computes it (prepare), beside the other callers,
// rather than the one writer that every delivery waits for: that was a third of what
// forensics cost the writer.
type forensicPrep struct {
	keys      []preparedKey // its business key, then its correlation keys
	keyHash   []byte        // storage.KeyHash of its key
	traceHash uint64        // traceHash of its source and keyHash
}

// prepare computes p for d, claimed with claim, appending its keys to room, whose
// grown slice it returns: the keys of a request's rows share one backing array.
func (p *forensicPrep) prepare(d *storage.Delivery, claim storage.ClaimOptions, room []preparedKey) []preparedKey {
	start := len(room)
	if d.BusinessKey != "" && claim.BusinessWindow > 0 {
		room = append(room, newPreparedKey("", d.Source, d.BusinessKey, claim.BusinessWindow))
	}
	for _, c := range d.Correlations {
		if c.Rule != "" { // "" is the business keys' rule
			room = append(room, newPreparedKey(c.Rule, d.Source, c.Hash, c.Window))
		}
	}
	p.keys = room[start:len(room):len(room)]
	p.keyHash = storage.KeyHash(d.Key)
	p.traceHash = traceHash(d.Source, p.keyHash)
	return room
}

func newPreparedKey(rule, source, hash string, window time.Duration) preparedKey {
	stored := storedHash(hash)
	return preparedKey{rule: rule, hash: hash, window: window, stored: stored, filterHash: filterHash(rule, source, stored)}
}

// storedHash is how a business or correlation key's hash h is stored and matched: the
// 32 bytes of a SHA-256 when h is the lower-case hex of one, as every hash the receiver
// makes is, and h itself, as TEXT, otherwise (no BLOB equals a TEXT). Half the bytes in
// every table and index entry that holds it; lower(hex()) gives h back.
func storedHash(h string) any {
	if len(h) != 2*sha256.Size {
		return h
	}
	for i := range len(h) {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return h
		}
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return h
	}
	return b
}

// keysOf lists the business and correlation keys of the accepted rows acc, business
// key first, row after row.
func keysOf(keys []forensicKey, acc []*recordRow) []forensicKey {
	for _, r := range acc {
		for _, k := range r.prep.keys {
			keys = append(keys, forensicKey{r: r, preparedKey: k})
		}
	}
	return keys
}

// padded calls f with consecutive chunks of xs: of the largest chunk size while more
// remain, then the rest in a statement of the smallest size that holds it (size), the
// chunk's rows first and padding after, so that a batch costs one statement rather
// than one for each binary digit of its size.
func padded[T any](xs []T, f func(chunk []T, size int) error) error {
	for len(xs) > 0 {
		n := min(len(xs), chunkSizes[0])
		size := chunkSizes[0]
		for _, s := range chunkSizes {
			if s >= n {
				size = s // chunkSizes descend: the last that holds n is the smallest
			}
		}
		if err := f(xs[:n], size); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

// lookUp finds the earliest match the database holds for each of keys.
func (f *forensics) lookUp(ctx context.Context, keys []*forensicKey) error {
	return padded(keys, func(chunk []*forensicKey, size int) error {
		st, err := multi(multiKeyFind, size)
		if err != nil {
			return err
		}
		args := make([]any, 0, 7*size)
		for i, k := range chunk {
			args = append(args, i, k.rule, k.stored, millis(k.r.d.ReceivedAt)-k.window.Milliseconds(), k.r.d.Source, k.r.d.Key,
				f.pendingRows.json(k.filterHash))
		}
		for range size - len(chunk) {
			args = append(args, -1, "", "", 0, "", "", "[]")
		}
		res, err := f.conn.QueryContext(ctx, st, args...)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			var i int
			var other sql.NullInt64
			var source sql.NullString
			if err := res.Scan(&i, &other, &source); err != nil {
				return err
			}
			if k := chunk[i]; other.Valid && (k.other == 0 || other.Int64 < k.other) {
				k.other, k.otherSource = other.Int64, source.String
			}
		}
		return res.Err()
	})
}

// store appends the keys of keys marked for storing to the pending keys, numbered from
// f.nextRowid on. Nothing is returned: a RETURNING clause cost more than the insert.
func (f *forensics) store(ctx context.Context, keys []forensicKey) error {
	add := f.add[:0]
	for i := range keys {
		if keys[i].wantsStoring {
			add = append(add, &keys[i])
		}
	}
	f.add = add
	defer clear(f.add)
	next := f.nextRowid
	err := padded(add, func(chunk []*forensicKey, size int) error {
		st, err := multi(multiKeyAdd, size)
		if err != nil {
			return err
		}
		args := f.args[:0]
		for _, k := range chunk {
			args = append(args, next, k.rule, k.stored, k.r.d.Source, k.r.id, millis(k.r.d.ReceivedAt))
			next++
		}
		for range size - len(chunk) {
			args = append(args, nil, nil, nil, nil, nil, nil)
		}
		f.args = args
		defer clear(f.args)
		// Query, not Exec, as the writer's own inserts (record.go): one crossing into
		// SQLite for the arguments and the step.
		rows, err := f.conn.QueryContext(ctx, st, args...)
		if err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		return err
	}
	for _, k := range add {
		f.pendingRows.add(k.filterHash, f.nextRowid)
		f.nextRowid++
		f.stored(k.filterHash)
	}
	f.pending += len(add)
	return nil
}

// businessKeys flags or blocks the rows whose business key keys found in the database
// or, failing that, earlier in the batch, and marks for storing the keys of those that
// stay accepted. rows is the whole batch.
func (f *forensics) businessKeys(ctx context.Context, rows []*recordRow, keys []forensicKey) error {
	type bkey struct{ source, hash string }
	first := map[bkey]*recordRow{}
	for j := range keys {
		k := &keys[j]
		if k.rule != "" {
			continue
		}
		r := k.r
		key := bkey{r.d.Source, r.d.BusinessKey}
		other := k.other
		if e, ok := first[key]; other == 0 && ok && e.d.Key != r.d.Key &&
			r.d.ReceivedAt.Sub(e.d.ReceivedAt) <= r.claim.BusinessWindow {
			other = e.id
		}
		if other != 0 && r.claim.BusinessBlocks {
			if err := f.block(ctx, rows, r, other); err != nil {
				return err
			}
			continue
		}
		if other != 0 {
			if err := f.flag(ctx, r, storage.SuspectBusinessKey, other, r.d.Source, "", time.Time{}); err != nil {
				return err
			}
		}
		if _, ok := first[key]; !ok {
			first[key] = r
		}
		k.wantsStoring = true
	}
	return nil
}

// lateLook is a row whose key may be traced, and the key's hash.
type lateLook struct {
	r    *recordRow
	hash []byte
}

// lateDuplicates traces the expired claims that rows of acc took over, and flags the
// rows still accepted whose key was claimed before: the claim they took over, or a
// trace the sweep left. Only the keys the filter may hold a trace of are looked up.
func (f *forensics) lateDuplicates(ctx context.Context, acc []*recordRow) error {
	look := f.late[:0]
	defer func() { clear(look); f.late = look[:0] }()
	for _, r := range acc {
		d := r.d
		prior, ok := f.prior[holderKey{d.Source, d.Key}]
		if !ok || prior.expiresAt > millis(d.ReceivedAt) || prior.first == r.id {
			if r.outcome == storage.Accepted {
				if f.mayMatch(r.prep.traceHash) {
					look = append(look, lateLook{r, r.prep.keyHash})
				}
			}
			continue
		}
		// The claim r took over had expired: traced now, as the sweep would have, even
		// if r was blocked since (the claim is gone either way).
		if err := f.exec(ctx, sqlTraceAdd, d.Source, r.prep.keyHash, prior.claimedAt, prior.first, prior.expiresAt); err != nil {
			return err
		}
		f.stored(r.prep.traceHash)
		if r.outcome != storage.Accepted {
			continue
		}
		other := prior.first
		var exists bool
		if _, err := f.queryRow(ctx, sqlDeliveryExists, []any{other}, &exists); err != nil {
			return err
		}
		if !exists {
			other = 0
		}
		if err := f.flag(ctx, r, storage.SuspectLateDuplicate, other, d.Source, "", fromMillis(prior.claimedAt)); err != nil {
			return err
		}
	}
	return chunked(look, func(off int, chunk []lateLook) error {
		st, err := multi(multiTraceFind, len(chunk))
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*len(chunk))
		for i, l := range chunk {
			args = append(args, i, l.r.d.Source, l.hash)
		}
		res, err := f.conn.QueryContext(ctx, st, args...)
		if err != nil {
			return err
		}
		type hit struct {
			i                int
			firstSeen, other int64
		}
		var hits []hit
		for res.Next() {
			var h hit
			if err := res.Scan(&h.i, &h.firstSeen, &h.other); err != nil {
				res.Close()
				return err
			}
			hits = append(hits, h)
		}
		if err := errors.Join(res.Err(), res.Close()); err != nil {
			return err
		}
		for _, h := range hits {
			r := chunk[h.i].r
			if err := f.flag(ctx, r, storage.SuspectLateDuplicate, h.other, r.d.Source, "", fromMillis(h.firstSeen)); err != nil {
				return err
			}
		}
		return nil
	})
}

// correlations flags the rows still accepted whose correlation key keys found in the
// database or, failing that, another source of the rule delivered earlier in the
// batch within its window, and marks all their keys for storing.
func (f *forensics) correlations(ctx context.Context, keys []forensicKey) error {
	all := f.corr[:0]
	for j := range keys {
		if k := &keys[j]; k.rule != "" && k.r.outcome == storage.Accepted {
			all = append(all, k)
		}
	}
	f.corr = all
	defer clear(f.corr)
	for j, p := range all {
		other, source := p.other, p.otherSource
		for _, e := range all[:j] {
			if other != 0 {
				break
			}
			if e.rule == p.rule && e.hash == p.hash && e.r.d.Source != p.r.d.Source &&
				p.r.d.ReceivedAt.Sub(e.r.d.ReceivedAt) <= p.window {
				other, source = e.r.id, e.r.d.Source
			}
		}
		if other != 0 {
			if err := f.flag(ctx, p.r, storage.SuspectCorrelation, other, source, p.rule, time.Time{}); err != nil {
				return err
			}
		}
		p.wantsStoring = true
	}
	return nil
}

// block turns r, accepted, into a duplicate of other, the delivery whose business key it
// repeats. Its claim is undone rather than kept: a claim says that its first delivery's
// event was taken in, and this one was not, so the keys pages list it nowhere, and a
// redelivery of its key meets the same business key and is blocked the same way (while
// the window lasts). Rows of the batch that lost their key's claim to r are repointed
// to other too, as r's redeliveries.
func (f *forensics) block(ctx context.Context, rows []*recordRow, r *recordRow, other int64) error {
	d := r.d
	if err := f.exec(ctx, sqlBlockClaim, d.Source, d.Key, r.id); err != nil {
		return fmt.Errorf("block: %w", err)
	}
	if err := f.exec(ctx, sqlBlockDelivery, r.id, other); err != nil {
		return fmt.Errorf("block: %w", err)
	}
	blocked := r.id
	r.outcome, r.first = storage.Duplicate, other
	for _, o := range rows {
		if o != r && o.outcome == storage.Duplicate && o.first == blocked {
			o.first = other
			if err := f.exec(ctx, sqlRepoint, o.id, other); err != nil {
				return fmt.Errorf("block: %w", err)
			}
		}
		// A redelivery that stored its body as a reference to the blocked one gets its
		// own copy: the blocked delivery is owed nothing and no longer accepted, so the
		// retention sweep deletes it without handing its body over (sweep.go).
		if o != r && o.bodyFrom == blocked {
			o.bodyFrom = 0
			if err := f.exec(ctx, sqlOwnBody, o.id, o.d.Body); err != nil {
				return fmt.Errorf("block: %w", err)
			}
		}
	}
	return nil
}

// flag records a suspect of kind on r, doubling other (0 when unknown). Suspects are
// rare: one statement each.
func (f *forensics) flag(ctx context.Context, r *recordRow, kind storage.SuspectKind, other int64, otherSource, rule string, firstSeen time.Time) error {
	d := r.d
	var first int64
	if !firstSeen.IsZero() {
		first = millis(firstSeen)
	}
	if err := f.exec(ctx, sqlSuspectAdd, string(kind), r.id, other, d.Source, otherSource, rule,
		d.Property, d.Booking, d.Amount, d.Currency, first, millis(d.ReceivedAt)); err != nil {
		return fmt.Errorf("flag %s: %w", kind, err)
	}
	r.suspects = append(r.suspects, kind)
	return nil
}

// traceExpired writes the traces of claims the sweep deleted, in its transaction: a
// delivery of one of their keys within the remember period is a late duplicate. Each
// is noted for the writer's filter (tracedKeys), as tx runs on the write connection.
func (db *DB) traceExpired(ctx context.Context, tx *sql.Tx, gone []expiredClaim) error {
	if len(gone) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, sqlTraceAdd)
	if err != nil {
		return fmt.Errorf("trace expired claims: %w", err)
	}
	defer st.Close()
	for _, c := range gone {
		hash := storage.KeyHash(c.key)
		db.traced.note(c.source, hash)
		if _, err := st.ExecContext(ctx, c.source, hash, c.claimedAt, c.first, c.expiresAt); err != nil {
			return fmt.Errorf("trace expired claims: %w", err)
		}
	}
	return nil
}

// expiredClaim is a claim the sweep deleted.
type expiredClaim struct {
	source, key          string
	first                int64
	claimedAt, expiresAt int64
}

// SweepTraces deletes at most limit traces of keys that expired before cutoff (now
// less the remember period), oldest first, and returns how many it deleted.
func (db *DB) SweepTraces(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "key traces", [2]string{}, `DELETE FROM key_traces WHERE (source, key_hash) IN (
	SELECT source, key_hash FROM key_traces WHERE expired_at < ?1 ORDER BY expired_at LIMIT ?2)`, cutoff, limit)
}

// SweepBusinessKeys deletes at most limit business keys seen before cutoff (now less
// the longest business window), oldest first, and returns how many it deleted. A key
// older than its own source's window is never matched (the lookup bounds it too); the
// sweep only keeps the table small.
func (db *DB) SweepBusinessKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "business keys", sqlMoveOldBusinessKeys, `DELETE FROM business_keys WHERE delivery IN (
	SELECT delivery FROM business_keys WHERE seen_at < ?1 ORDER BY seen_at LIMIT ?2)`, cutoff, limit)
}

// Before a sweep, the pending keys it would delete are moved into their indexed table
// (in practice none is: keys are moved within minutes, swept after days).
var (
	sqlMoveOldBusinessKeys = [2]string{`INSERT OR IGNORE INTO business_keys (delivery, source, hash, seen_at)
	SELECT delivery, source, hash, seen_at FROM forensic_keys_pending WHERE rule = '' AND seen_at < ?1`,
		`DELETE FROM forensic_keys_pending WHERE rule = '' AND seen_at < ?1`}
	sqlMoveOldCorrelationKeys = [2]string{`INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at)
	SELECT rule, hash, source, delivery, seen_at FROM forensic_keys_pending WHERE rule != '' AND seen_at < ?1`,
		`DELETE FROM forensic_keys_pending WHERE rule != '' AND seen_at < ?1`}
)

// SweepCorrelationKeys deletes at most limit correlation keys seen before cutoff (now
// less the longest correlation window), oldest first, and returns how many it deleted.
func (db *DB) SweepCorrelationKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return db.sweepSeen(ctx, "correlation keys", sqlMoveOldCorrelationKeys, `DELETE FROM correlation_keys WHERE rowid IN (
	SELECT rowid FROM correlation_keys WHERE seen_at < ?1 ORDER BY seen_at LIMIT ?2)`, cutoff, limit)
}

func (db *DB) sweepSeen(ctx context.Context, what string, move [2]string, q string, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		for _, m := range move {
			if m == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, m, millis(cutoff)); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, q, millis(cutoff), max(limit, 1))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
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
	var out []storage.Suspect
	if p.BusinessKey != "" && p.BusinessWindow > 0 {
		var other int64
		err := db.read.QueryRowContext(ctx, sqlBusinessMatch, p.Source, storedHash(p.BusinessKey),
			at-p.BusinessWindow.Milliseconds(), p.Key).Scan(&other)
		switch {
		case err == nil:
			out = append(out, storage.Suspect{Kind: storage.SuspectBusinessKey, Other: other, Source: p.Source, OtherSource: p.Source})
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("would flag: business key: %w", err)
		}
	}
	if p.Key != "" {
		var first, claimedAt, expiresAt int64
		// A first delivery that retention swept is linked to nothing, as intake links it
		// when it takes the claim over.
		err := db.read.QueryRowContext(ctx, `SELECT CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.id = c.first_delivery)
			THEN c.first_delivery ELSE 0 END, c.claimed_at, c.expires_at FROM claims c
			WHERE c.source = ? AND c.key = ? AND c.state = 'processed'`, p.Source, p.Key).Scan(&first, &claimedAt, &expiresAt)
		switch {
		case err == nil && expiresAt <= at:
			out = append(out, storage.Suspect{Kind: storage.SuspectLateDuplicate, Other: first, Source: p.Source, FirstSeen: fromMillis(claimedAt)})
		case err == nil:
			// Held: the delivery would be a duplicate, not a late one.
		case errors.Is(err, sql.ErrNoRows):
			var firstSeen, other int64
			err := db.read.QueryRowContext(ctx, sqlTraceFind, p.Source, storage.KeyHash(p.Key)).Scan(&firstSeen, &other)
			switch {
			case err == nil:
				out = append(out, storage.Suspect{Kind: storage.SuspectLateDuplicate, Other: other, Source: p.Source, FirstSeen: fromMillis(firstSeen)})
			case !errors.Is(err, sql.ErrNoRows):
				return nil, fmt.Errorf("would flag: trace: %w", err)
			}
		default:
			return nil, fmt.Errorf("would flag: claim: %w", err)
		}
	}
	for _, c := range p.Correlations {
		var other int64
		var otherSource string
		err := db.read.QueryRowContext(ctx, sqlCorrelationMatch, c.Rule, storedHash(c.Hash),
			at-c.Window.Milliseconds(), p.Source).Scan(&other, &otherSource)
		switch {
		case err == nil:
			out = append(out, storage.Suspect{Kind: storage.SuspectCorrelation, Other: other, Source: p.Source, OtherSource: otherSource, Rule: c.Rule})
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("would flag: correlation %s: %w", c.Rule, err)
		}
	}
	return out, nil
}

// FlagsOf returns the forensic flags of delivery id. Returns ErrNotFound if there is no
// such delivery.
func (db *DB) FlagsOf(ctx context.Context, id int64) (storage.DeliveryFlags, error) {
	var f storage.DeliveryFlags
	err := db.read.QueryRowContext(ctx, `SELECT money_mismatch FROM deliveries WHERE id = ?`, id).Scan(&f.MoneyMismatch)
	if errors.Is(err, sql.ErrNoRows) {
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

// pendingIndex is the rowids of the pending keys by their filterHash. Nearly every hash
// has one rowid (a key pending twice is a double): it is kept without a slice of its
// own, which would cost an allocation for each key stored.
type pendingIndex struct {
	one  map[uint64]int64
	more map[uint64][]int64 // the rowids after the first, for the few hashes that have several
}

func (p *pendingIndex) reset() {
	if p.one == nil {
		p.one, p.more = make(map[uint64]int64), make(map[uint64][]int64)
	}
	clear(p.one)
	clear(p.more)
}

func (p *pendingIndex) add(h uint64, rowid int64) {
	if _, ok := p.one[h]; !ok {
		p.one[h] = rowid
		return
	}
	p.more[h] = append(p.more[h], rowid)
}

// json is the rowids of hash h as a JSON array, for json_each: "[]" for none.
func (p *pendingIndex) json(h uint64) string {
	first, ok := p.one[h]
	if !ok {
		return "[]"
	}
	return rowidsJSON(append([]int64{first}, p.more[h]...))
}

// rowidsJSON is rowids as a JSON array, for json_each.
func rowidsJSON(rowids []int64) string {
	if len(rowids) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 12*len(rowids))
	b = append(b, '[')
	for i, id := range rowids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
