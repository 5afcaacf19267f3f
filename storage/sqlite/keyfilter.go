package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// The writer's filter of forensic keys: a Bloom filter of every business and
// correlation key the indexed tables and the pending ones may hold, and of every key
// traced in key_traces, so that a key it has never seen costs no lookup at all. Most
// keys are new (a double is the exception, a late one rarer still), and the lookups
// were the largest part of what forensics cost intake.
//
// A "no" of the filter must be certain, a "maybe" is looked up as before. So the filter
// holds at least every key the database holds:
//
//   - Every key the writer stores is added as it is stored: business and correlation
//     keys, and the traces of the expired claims its rows take over. One whose
//     transaction rolls back stays: a key too many only costs a lookup. Keys that a
//     release or a sweep deletes stay too, for the same reason; the filter is built
//     again once it has doubled since it was built, which sheds them.
//   - It is built from the database on a read connection, in one statement (one
//     snapshot), while the writer goes on without it (every key looked up); the keys the
//     writer stores meanwhile are added to it when it is taken into use.
//   - Another connection (another process) that commits may have stored keys: the
//     write connection's data_version says so, inside the batch's transaction once it
//     holds the write lock. The filter is then dropped and built again, and so is one
//     being built when another connection committed after the writer asked for it.
//     Only this process's write connection stores keys without changing it: that is
//     the writer, the sweeps that move pending keys into the indexed tables (keys
//     the filter has), and the sweep of expired claims, which traces their keys: it
//     notes each trace's hash (tracedKeys) in its transaction, while it holds the write
//     connection, and the writer adds them at its next batch, before any lookup.
//   - Nothing of it is kept on disk: a process that starts builds it again.
type keyFilter struct {
	layers []filterLayer
	built  int // keys read from the database when it was built
	added  int // keys added since
}

// filterLayer is one Bloom filter of the keyFilter's: once it holds its capacity,
// another, twice as large, takes the keys that follow, so that the rate of false
// "maybe"s stays about the same (under 1 % a layer).
type filterLayer struct {
	bits     []uint64
	m        uint64 // the number of bits
	n, limit int
}

const (
	filterBitsPerKey = 10
	filterProbes     = 7 // the best number for 10 bits a key: 0.8 % false "maybe"s
	filterMinKeys    = 1 << 16
	filterRebuildMin = 1 << 20
)

// filterSeed seeds the keys' hashes: the filter lives in this process only.
var filterSeed = maphash.MakeSeed()

// filterHash is the filter's hash of a key: a business key (rule "") by its source and
// hash, a correlation key by its rule and hash, as the lookups match them. hash is as
// stored (storedHash): the bytes of a BLOB or a TEXT, as the database gives them back.
func filterHash(rule, source string, hash any) uint64 {
	var h maphash.Hash
	h.SetSeed(filterSeed)
	h.WriteString(rule)
	h.WriteByte(0)
	if rule == "" {
		h.WriteString(source)
	}
	h.WriteByte(0)
	switch v := hash.(type) {
	case []byte:
		h.Write(v)
	case string:
		h.WriteString(v)
	}
	return h.Sum64()
}

// traceHash is the filter's hash of the trace of a key of source whose hash
// (storage.KeyHash) is keyHash: apart from the business keys (no source begins with a
// 0 byte), and a coincidence with another key only costs a lookup.
func traceHash(source string, keyHash []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(filterSeed)
	h.WriteByte(0)
	h.WriteByte(0)
	h.WriteString(source)
	h.WriteByte(0)
	h.Write(keyHash)
	return h.Sum64()
}

// filterHashBytes is filterHash of a key read from the database.
func filterHashBytes(rule, source, hash []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(filterSeed)
	h.Write(rule)
	h.WriteByte(0)
	if len(rule) == 0 {
		h.Write(source)
	}
	h.WriteByte(0)
	h.Write(hash)
	return h.Sum64()
}

func newFilterLayer(keys int) filterLayer {
	words := (keys*filterBitsPerKey + 63) / 64
	return filterLayer{bits: make([]uint64, words), m: uint64(words) * 64, limit: keys}
}

// probes calls f with each bit of h in l: double hashing of h's two halves, each bit
// reduced to the layer's size by a multiply and a shift rather than a division.
func (l *filterLayer) probes(h uint64, f func(word int, bit uint64) bool) bool {
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := range uint32(filterProbes) {
		b := uint64(h1+i*h2) * l.m >> 32
		if !f(int(b>>6), 1<<(b&63)) {
			return false
		}
	}
	return true
}

func (l *filterLayer) add(h uint64) {
	l.probes(h, func(word int, bit uint64) bool {
		l.bits[word] |= bit
		return true
	})
	l.n++
}

func (l *filterLayer) mayHold(h uint64) bool {
	return l.probes(h, func(word int, bit uint64) bool { return l.bits[word]&bit != 0 })
}

// newKeyFilter is a filter of keys, with room for as many again before it adds a
// layer.
func newKeyFilter(keys []uint64) *keyFilter {
	f := &keyFilter{built: len(keys)}
	f.layers = []filterLayer{newFilterLayer(max(2*len(keys), filterMinKeys))}
	for _, h := range keys {
		f.layers[0].add(h)
	}
	return f
}

func (f *keyFilter) add(h uint64) {
	l := &f.layers[len(f.layers)-1]
	if l.n >= l.limit {
		f.layers = append(f.layers, newFilterLayer(2*l.limit))
		l = &f.layers[len(f.layers)-1]
	}
	l.add(h)
	f.added++
}

// mayHold is false when the database holds no key of hash h for certain.
func (f *keyFilter) mayHold(h uint64) bool {
	for i := range f.layers {
		if f.layers[i].mayHold(h) {
			return true
		}
	}
	return false
}

// stale says the filter has doubled since it was built: it is built again, to forget
// the keys swept or released since.
func (f *keyFilter) stale() bool { return f.added > max(f.built, filterRebuildMin) }

// bytes is the filter's size in memory.
func (f *keyFilter) bytes() int {
	n := 0
	for _, l := range f.layers {
		n += 8 * len(l.bits)
	}
	return n
}

// sqlFilterKeys reads every business and correlation key, indexed or pending, and
// every trace (trace 1), in one statement: one snapshot, so that none is missed as it
// moves from one table to the other.
const sqlFilterKeys = `SELECT 0, '', source, hash FROM business_keys
UNION ALL SELECT 0, rule, '', hash FROM correlation_keys
UNION ALL SELECT 0, rule, source, hash FROM forensic_keys_pending
UNION ALL SELECT 1, '', source, key_hash FROM key_traces`

// buildKeyFilter reads the keys of the database through pool into a new filter.
func buildKeyFilter(ctx context.Context, pool *sql.DB) (*keyFilter, error) {
	rows, err := pool.QueryContext(ctx, sqlFilterKeys)
	if err != nil {
		return nil, fmt.Errorf("build key filter: %w", err)
	}
	defer rows.Close()
	var keys []uint64
	var trace bool
	var rule, source, hash sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&trace, &rule, &source, &hash); err != nil {
			return nil, fmt.Errorf("build key filter: %w", err)
		}
		if hook := filterReadingHook.Load(); hook != nil && len(keys) == 0 {
			(*hook)()
		}
		if trace {
			keys = append(keys, traceHash(string(source), hash))
		} else {
			keys = append(keys, filterHashBytes(rule, source, hash))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("build key filter: %w", err)
	}
	return newKeyFilter(keys), nil
}

// filterBuild is a filter being built for the writer: asked for when the write
// connection's data_version was version, it is taken into use only if no other
// connection has committed since (stale otherwise), with the keys the writer stored
// meanwhile (since).
type filterBuild struct {
	version int64
	stale   bool
	since   []uint64
	done    chan filterBuilt
}

type filterBuilt struct {
	f   *keyFilter
	err error
}

// filterReadingHook, when set (tests set it), runs in a build once its query has read
// a row, in the middle of its read transaction.
var filterReadingHook atomic.Pointer[func()]

// filterBuiltHook, when set (tests set it), runs in the build once it has handed the
// filter over: the writer takes it into use at its next batch.
var filterBuiltHook atomic.Pointer[func()]

// startFilterBuild builds a filter on pool in the background, giving up when closing
// is closed.
func startFilterBuild(pool *sql.DB, closing <-chan struct{}, version int64) *filterBuild {
	b := &filterBuild{version: version, done: make(chan filterBuilt, 1)}
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		f, err := buildKeyFilter(ctx, pool)
		b.done <- filterBuilt{f, err}
		if hook := filterBuiltHook.Load(); hook != nil {
			(*hook)()
		}
	}()
	return b
}

// tracedKeys are the hashes (traceHash) of the traces that writes on the write
// connection other than the writer's batches wrote (the sweep of expired claims): their
// commits leave the connection's data_version as it was. Each is noted in its
// transaction, while it holds the write connection, so that the writer, which holds it
// for each batch, takes them at the next one, before any lookup. Past tracedMax
// (intake idle while the sweep goes on) only that some were left out is kept: the
// writer then builds its filter again.
type tracedKeys struct {
	mu     sync.Mutex
	hashes []uint64
	lost   bool
}

// tracedMax bounds the hashes noted between two batches of the writer. Tests lower it.
var tracedMax = 1 << 16

// note notes the trace of a key of source whose hash is keyHash.
func (t *tracedKeys) note(source string, keyHash []byte) {
	h := traceHash(source, keyHash)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.hashes) >= tracedMax {
		t.hashes, t.lost = nil, true
	}
	if !t.lost {
		t.hashes = append(t.hashes, h)
	}
}

// take returns the hashes noted since the last take, or lost when some were left out.
func (t *tracedKeys) take() (hashes []uint64, lost bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hashes, lost = t.hashes, t.lost
	t.hashes, t.lost = nil, false
	return hashes, lost
}

// checkFilter keeps the writer's filter whole, in the batch's transaction once it holds
// the write lock: exists says the connection is the one the filter was made for (its
// temporary table exists), version is its data_version. It drops the filter when
// another connection has committed, or when traces written on this one were left out
// of tracedKeys, takes a finished build into use, adds the traces noted since the last
// batch, and starts a build when the writer has no filter or a stale one.
func (f *forensics) checkFilter(exists bool, version int64) {
	traced, lost := f.traced.take()
	if f.filter != nil && (!exists || version != f.filterAt || lost) {
		f.filter = nil
	}
	if f.checked && (!exists || version != f.checkedAt) {
		f.foreignAt = time.Now()
	}
	f.checked, f.checkedAt = true, version
	if b := f.build; b != nil {
		if !exists || version != b.version || lost {
			b.stale = true
		}
		select {
		case r := <-b.done:
			f.build = nil
			if r.err == nil && !b.stale {
				for _, h := range b.since {
					r.f.add(h)
				}
				f.filter, f.filterAt = r.f, version
				f.adopted.Add(1)
			}
		default:
		}
	}
	// Into the filter, or the one being built. With neither, the next build reads them:
	// their transactions have ended, as the write connection is the writer's now.
	for _, h := range traced {
		f.stored(h)
	}
	if f.build == nil && f.read != nil && (f.filter == nil || f.filter.stale()) && time.Since(f.foreignAt) >= filterQuiet {
		f.build = startFilterBuild(f.read, f.closing, version)
	}
}

// filterQuiet is how long no other connection must have committed before the writer
// builds its filter: another process writing all the time (a second server on the
// file) would have every build thrown away, a second of work a million keys. Until
// then every key is looked up. Tests shorten it.
var filterQuiet = 10 * time.Second

// stored notes a key the writer stores, of hash h, in the filter and in one being built.
func (f *forensics) stored(h uint64) {
	if f.filter != nil {
		f.filter.add(h)
	}
	if f.build != nil {
		f.build.since = append(f.build.since, h)
	}
}

// mayMatch is false when the database holds no key of hash h for certain.
func (f *forensics) mayMatch(h uint64) bool { return f.filter == nil || f.filter.mayHold(h) }
