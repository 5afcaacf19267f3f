//go:build load

package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The claims-only reference store: hookdedup's own intake handler (as loadNoStore
// configures it) in front of the least that a durable deduplicator stores, one claim
// row per key in SQLite, group-committed. The issue it answers: what does keeping every
// delivery (its row, its body, the console's indexes) cost on top of a claim? Its CPU
// per request is the yardstick serve's is compared with in the summary.
//
// It does what a careful prototype would: WAL with synchronous=FULL, one writer
// goroutine that takes what is queued (up to 256 requests) into one transaction, one
// multi-row INSERT ... ON CONFLICT DO NOTHING RETURNING per chunk of rows, one fsync
// per batch, and an index of expiry times for a sweep. The page cache and memory map
// are serve's defaults, so that growth compares like with like. Keys are not taken over
// on expiry and nothing is handed downstream.

const claimsOnlySchema = `
CREATE TABLE IF NOT EXISTS claims (
    id           INTEGER PRIMARY KEY,
    source       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    payload_hash TEXT    NOT NULL,
    claimed_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    UNIQUE (source, key)
);
CREATE INDEX IF NOT EXISTS claims_expires_at ON claims (expires_at);`

// claimsOnlyChunks are the row counts of the writer's prepared statements.
var claimsOnlyChunks = []int{128, 64, 32, 16, 8, 4, 2, 1}

type claimsOnly struct {
	db    *sql.DB
	reqs  chan *claimsOnlyReq
	stmts map[int]*sql.Stmt
	next  atomic.Int64 // the last delivery number given
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

type claimsOnlyReq struct {
	d    *storage.Delivery
	ttl  time.Duration
	won  bool
	done chan error
}

// openClaimsOnly opens (creating) the reference store's database at path.
func openClaimsOnly(t testing.TB, path string) *claimsOnly {
	t.Helper()
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	params.Set("_synchronous", "FULL")
	params.Set("_busy_timeout", "5000")
	params.Set("_txlock", "immediate")
	params.Set("_cache_size", fmt.Sprint(-sqlite.DefaultCacheSize/1024))
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	for _, q := range []string{"PRAGMA temp_store = MEMORY",
		fmt.Sprintf("PRAGMA mmap_size = %d", sqlite.DefaultMmapSize), claimsOnlySchema} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("claims-only store: %s: %v", q, err)
		}
	}
	s := &claimsOnly{db: db, reqs: make(chan *claimsOnlyReq, 1024), stmts: map[int]*sql.Stmt{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, n := range claimsOnlyChunks {
		var b strings.Builder
		b.WriteString("INSERT INTO claims (source, key, payload_hash, claimed_at, expires_at) VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?)")
		}
		b.WriteString(" ON CONFLICT (source, key) DO NOTHING RETURNING source, key")
		st, err := db.Prepare(b.String())
		if err != nil {
			db.Close()
			t.Fatal(err)
		}
		s.stmts[n] = st
	}
	if err := db.QueryRow(`SELECT coalesce(max(id), 0) FROM claims`).Scan(new(int64)); err != nil {
		t.Fatal(err)
	}
	go s.writer()
	return s
}

// fill adds n claims of source with keys key(from) .. key(from+n-1), in large
// transactions.
func (s *claimsOnly) fill(t *testing.T, source string, from, n int, key func(int) string) {
	t.Helper()
	now := time.Now().UnixMilli()
	for done := 0; done < n; {
		tx, err := s.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		st, err := tx.Prepare(`INSERT INTO claims (source, key, payload_hash, claimed_at, expires_at) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			t.Fatal(err)
		}
		for end := min(n, done+100_000); done < end; done++ {
			i := from + done
			if _, err := st.Exec(source, key(i), fmt.Sprintf("%064x", i), now, now+24*3600*1000); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *claimsOnly) close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		for _, st := range s.stmts {
			st.Close()
		}
		s.db.Close()
	})
}

// Record queues d's claim and waits for the commit that holds it.
func (s *claimsOnly) Record(ctx context.Context, d *storage.Delivery, c storage.ClaimOptions) error {
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = time.Now()
	}
	r := &claimsOnlyReq{d: d, ttl: c.TTL, done: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := <-r.done; err != nil {
		return err
	}
	d.ID = s.next.Add(1)
	d.Outcome, d.FirstDelivery = storage.Duplicate, 0
	if r.won {
		d.Outcome, d.FirstDelivery = storage.Accepted, d.ID
	}
	return nil
}

func (s *claimsOnly) RecordBatch(ctx context.Context, items []*storage.Delivery, c storage.ClaimOptions) error {
	for _, d := range items {
		if err := s.Record(ctx, d, c); err != nil {
			return err
		}
	}
	return nil
}

func (s *claimsOnly) Ping(context.Context) error { return nil }

func (s *claimsOnly) writer() {
	defer close(s.done)
	batch := make([]*claimsOnlyReq, 0, 256)
	won := map[[2]string]bool{}
	var args []any
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.stop:
			return
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		clear(won)
		err := func() error {
			tx, err := s.db.Begin()
			if err != nil {
				return err
			}
			defer tx.Rollback()
			for rest := batch; len(rest) > 0; {
				n := 1
				for _, size := range claimsOnlyChunks {
					if size <= len(rest) {
						n = size
						break
					}
				}
				args = args[:0]
				for _, r := range rest[:n] {
					at := r.d.ReceivedAt.UnixMilli()
					args = append(args, r.d.Source, r.d.Key, r.d.PayloadHash, at, at+r.ttl.Milliseconds())
				}
				rows, err := tx.Stmt(s.stmts[n]).Query(args...)
				if err != nil {
					return err
				}
				for rows.Next() {
					var k [2]string
					if err := rows.Scan(&k[0], &k[1]); err != nil {
						rows.Close()
						return err
					}
					won[k] = true
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				rest = rest[n:]
			}
			return tx.Commit()
		}()
		for _, r := range batch {
			k := [2]string{r.d.Source, r.d.Key}
			r.won = err == nil && won[k]
			delete(won, k) // a second delivery of the key in one batch is its duplicate
			r.done <- err
		}
		clear(batch)
	}
}

// loadClaimsOnly opens the claims-only store at dir/claims.db (creating it, or going on
// with the claims it holds) and serves the intake handler over it.
func loadClaimsOnly(t *testing.T, dir string) (url string, s *claimsOnly) {
	t.Helper()
	s = openClaimsOnly(t, filepath.Join(dir, "claims.db"))
	t.Cleanup(s.close)
	return loadIntake(t, s), s
}

// BenchmarkRecordBeside measures serve's store (sqlite.DB's Record) and the claims-only
// store on the same deliveries, with 64 callers as in the load runs, but without HTTP:
// what keeping every delivery costs in storage alone. The two take turns, a few
// thousand deliveries at a time, each on its own file, so that the machine's other work
// weighs on both alike; each turn's CPU ratio is noted and the median reported
// (cpu-ratio), beside each store's CPU a delivery. Run with
//
//	go test -tags load -run '^$' -bench RecordBeside -benchtime 40000x ./cmd/hookdedup/
func BenchmarkRecordBeside(b *testing.B) {
	type recorder interface {
		Record(context.Context, *storage.Delivery, storage.ClaimOptions) error
	}
	for _, mix := range []string{"Unique", "HalfDuplicates"} {
		b.Run(mix, func(b *testing.B) {
			serve := storagetest.OpenPath(b, filepath.Join(b.TempDir(), "hookdedup.db"), sqlite.Options{Synchronous: "FULL"})
			claims := openClaimsOnly(b, filepath.Join(b.TempDir(), "claims.db"))
			defer claims.close()
			stores := []recorder{serve, claims}
			next := make([]atomic.Int64, len(stores))
			claim := storage.ClaimOptions{TTL: 24 * time.Hour}
			// turn records n deliveries into store i from 64 goroutines; it returns the
			// process's CPU time they took and the bytes it wrote meanwhile (the WAL's
			// frames and the checkpoints' copies of them).
			turn := func(i, n int) (time.Duration, int64) {
				var wg sync.WaitGroup
				var left atomic.Int64
				left.Store(int64(n))
				cpu, wrote := besideCPU(), storagetest.ProcessIO("self").Written
				for range 64 {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							k := next[i].Add(1)
							if mix == "HalfDuplicates" && k%2 == 0 {
								k-- // the key the previous caller claimed
							}
							if err := stores[i].Record(context.Background(), besideDelivery(k), claim); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				return besideCPU() - cpu, storagetest.ProcessIO("self").Written - wrote
			}
			const turnSize = 4000
			var spent [2]time.Duration
			var written [2]int64
			var done [2]int
			var ratios []float64
			b.ResetTimer()
			for left := b.N; left > 0; {
				n := min(left, turnSize)
				left -= n
				var cpu [2]time.Duration
				for j := range stores {
					i := j
					if len(ratios)%2 == 1 {
						i = len(stores) - 1 - j // every other turn, the claims-only store first
					}
					var w int64
					cpu[i], w = turn(i, n)
					spent[i] += cpu[i]
					written[i] += w
					done[i] += n
				}
				ratios = append(ratios, float64(cpu[0])/float64(cpu[1]))
			}
			b.StopTimer()
			b.ReportMetric(float64(spent[0].Microseconds())/float64(done[0]), "store-cpu-µs/op")
			b.ReportMetric(float64(spent[1].Microseconds())/float64(done[1]), "claims-cpu-µs/op")
			b.ReportMetric(median(ratios), "cpu-ratio")
			b.ReportMetric(float64(written[0])/float64(done[0]), "store-written-B/op")
			b.ReportMetric(float64(written[1])/float64(done[1]), "claims-written-B/op")
		})
	}
}

// besideCPU is the CPU time this process has used, user and system.
func besideCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// besideDelivery is the k-th delivery BenchmarkRecordBeside records: what the intake
// handler hands a store for a signed delivery of the load runs, its key spread over
// the key space as providers' ids are.
func besideDelivery(k int64) *storage.Delivery {
	h := fnv.New64a()
	fmt.Fprint(h, k)
	key := fmt.Sprintf("msg_%016x_%d", h.Sum64(), k)
	body := loadFillBody(int(k))
	sum := sha256.Sum256(body)
	return &storage.Delivery{
		Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", KeyFrom: "header:webhook-id",
		PayloadHash: hex.EncodeToString(sum[:]), Property: fmt.Sprintf("PROP-%06d", k%400), Booking: fmt.Sprintf("BK-f-%d", k),
		EventStatus: "cancelled", Amount: "412.50", Currency: "EUR", RemoteAddr: "127.0.0.1:53412",
		ContentType: "application/json",
		Headers: map[string][]string{
			"Content-Type":      {"application/json"},
			"Content-Length":    {fmt.Sprint(len(body))},
			"User-Agent":        {"hookdedup-bench/wrk"},
			"Webhook-Id":        {key},
			"Webhook-Timestamp": {"1764441727"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		},
		Body: body,
	}
}
