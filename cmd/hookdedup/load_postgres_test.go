//go:build load

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// The harness's PostgreSQL rows: serve on an empty PostgreSQL database (a fresh one for
// each run, on the throwaway cluster of postgrestest, fsync and synchronous_commit on as
// PostgreSQL ships), one replica alone and three replicas sharing the load, each driven
// by a wrk of its own with a third of the connections. The server CPU of a request is
// the replicas' CPU over the requests they answered; PostgreSQL's own is measured apart,
// from its processes, since on a real deployment it runs on a machine of its own.

// loadPostgresRow is a row of the PostgreSQL section, with the CPU PostgreSQL spent per
// request beside the replicas'.
type loadPostgresRow struct {
	*loadRow
	replicas int
	pgCPU    []float64 // µs a request, per run
	bin      string    // the hookdedup binary whose serve runs; "" for this build's
	extra    string    // configuration added to serve's (loadForensics)
}

// loadPostgresReplicas is BENCH_PG_REPLICAS: the numbers of replicas of the PostgreSQL
// rows, 1 and 3 unless told.
func loadPostgresReplicas(t *testing.T) []int {
	v := os.Getenv("BENCH_PG_REPLICAS")
	if v == "" {
		return []int{1, 3}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("BENCH_PG_REPLICAS=%q: want positive integers, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

// runPostgres drives replicas serve processes on one fresh PostgreSQL database for one
// run of mix, and reports the run into r.
func runPostgres(t *testing.T, k loadKnobs, dir string, r *loadPostgresRow, mix string, run int, report func(*loadRow, loadResult)) {
	t.Helper()
	url := postgrestest.NewDatabase(t)
	servers := make([]*loadServer, r.replicas)
	for i := range servers {
		sub := filepath.Join(dir, fmt.Sprintf("pg-%d-%s-%d-%d", r.replicas, mix, run, i))
		os.MkdirAll(sub, 0o755)
		bin := r.bin
		if bin == "" {
			bin = hookdedupBinary(t)
		}
		servers[i] = loadServeBinary(t, bin, sub, url, "FULL", r.extra)
	}
	if run == 0 {
		for _, s := range servers {
			loadWrk(t, k, s.url, "unique", 2*time.Second) // warm-up, discarded
		}
	}
	sub := k
	sub.conns = max(k.conns/r.replicas, 1)
	sub.threads = max(k.threads/r.replicas, 1)
	pids := make([]string, len(servers))
	cpu0 := make([]time.Duration, len(servers))
	for i, s := range servers {
		pids[i] = strconv.Itoa(s.cmd.Process.Pid)
		cpu0[i] = postgrestest.ProcessCPU(pids[i])
	}
	serverCPU := postgrestest.ClusterCPU(t, url)
	pg0 := serverCPU()
	results := make([]loadResult, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { results[i] = loadWrk(t, sub, s.url, mix, k.duration) })
	}
	wg.Wait()
	pgUsed := serverCPU() - pg0
	// Together: requests summed over the same span, p50 the requests' weighted mean of
	// the three, p99 the worst of the three (no smaller than the merged one's).
	var x loadResult
	var p50 float64
	var served time.Duration
	for i, res := range results {
		x.Requests += res.Requests
		x.DurationUS = max(x.DurationUS, res.DurationUS)
		x.ErrStatus += res.ErrStatus
		x.ErrRead += res.ErrRead
		x.ErrTimeout += res.ErrTimeout
		x.P99US = max(x.P99US, res.P99US)
		p50 += float64(res.P50US) * float64(res.Requests)
		served += postgrestest.ProcessCPU(pids[i]) - cpu0[i]
	}
	x.RPS = float64(x.Requests) / (float64(x.DurationUS) / 1e6)
	x.P50US = int64(p50 / float64(max(x.Requests, 1)))
	x.CPUPerReq = float64(served.Microseconds()) / float64(max(x.Requests, 1))
	x.Load1 = loadAverage()
	if x.ErrStatus+x.ErrRead+x.ErrTimeout > 0 {
		t.Fatalf("%s %s: %d answers other than 200, %d read errors, %d timeouts", r.scenario, mix, x.ErrStatus, x.ErrRead, x.ErrTimeout)
	}
	r.pgCPU = append(r.pgCPU, float64(pgUsed.Microseconds())/float64(max(x.Requests, 1)))
	report(r.loadRow, x)
	for _, s := range servers {
		s.stop()
	}
	loadPostgresSettle(t, url)
}

// loadPostgresSettle leaves the cluster with nothing to do once a row's servers have
// stopped: the database's tables vacuumed and analysed, which autovacuum would
// otherwise do a minute later, and every dirty page written by a checkpoint, which
// would otherwise run in the background. Both would fall on the rows measured next.
func loadPostgresSettle(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// postgresPairs is the order of run run of the PostgreSQL rows: the rows of one number
// of replicas and one mix side by side, each binary's without and with forensics next
// to each other, the order reversed from one run (and one group) to the next, as the
// SQLite rows are.
func postgresPairs(rows []*loadPostgresRow, run int) [][]*loadPostgresRow {
	var groups [][]*loadPostgresRow
	for _, r := range rows {
		if n := len(groups); n > 0 && groups[n-1][0].replicas == r.replicas && groups[n-1][0].mix == r.mix {
			groups[n-1] = append(groups[n-1], r)
			continue
		}
		groups = append(groups, []*loadPostgresRow{r})
	}
	for g, group := range groups {
		slices.SortStableFunc(group, func(a, b *loadPostgresRow) int { return strings.Compare(b.bin, a.bin) })
		if (run+g)%2 == 1 {
			slices.Reverse(group)
		}
	}
	return groups
}

// postgresRow is the row of rows with replicas of bin's serve on mix, without extra
// configuration; nil if there is none.
func postgresRow(rows []*loadPostgresRow, bin string, replicas int, mix string) *loadPostgresRow {
	for _, r := range rows {
		if r.replicas == replicas && r.mix == mix && r.bin == bin && r.extra == "" {
			return r
		}
	}
	return nil
}

// postgresSummary is the PostgreSQL section of the summary: each row against SQLite's
// (synchronous=FULL, the same mix, the same run), the target, and the CPU of a request
// on each side, from which the scaling on more cores is projected.
func postgresSummary(b *strings.Builder, rows []*loadPostgresRow, sqlite map[string]*loadRow) {
	if len(rows) == 0 || len(rows[0].runs) == 0 {
		return
	}
	fmt.Fprintf(b, "- PostgreSQL (%s):\n", "the throwaway cluster of postgrestest on this machine, fsync on")
	for _, r := range rows {
		lite := sqlite[r.mix]
		if lite == nil || len(lite.runs) == 0 {
			continue
		}
		pg := median(r.pgCPU)
		fmt.Fprintf(b, "  - %s, %s: %.0f req/s, %.2f× SQLite's; p50 %.2f ms, p99 %.2f ms; CPU a request: serve %.0f µs, PostgreSQL %.0f µs",
			r.scenario, r.mix, r.rps(), r.rps()/lite.rps(), r.p50(), r.p99(), r.cpu(), pg)
		if r.replicas == 1 && r.extra == "" {
			fmt.Fprintf(b, " (target ≥ 0.6× SQLite and p99 ≤ 20 ms: %s)", map[bool]string{true: "met", false: "MISSED"}[r.rps() >= 0.6*lite.rps() && r.p99() <= 20])
		}
		// On a machine of its own with n cores, a replica is bound by its own CPU a
		// request, and PostgreSQL, on another, by its: the lower of the two bounds.
		fmt.Fprintf(b, "; bound per core: serve %.0f req/s, PostgreSQL %.0f req/s\n", 1e6/r.cpu(), 1e6/max(pg, 1))
	}
	for _, r := range rows {
		if off := postgresRow(rows, r.bin, r.replicas, r.mix); r.extra != "" && len(r.runs) > 0 && off != nil && len(off.runs) > 0 {
			engine := "PostgreSQL"
			if r.bin != "" {
				engine = "BENCH_BASELINE, PostgreSQL"
			}
			forensicsSummary(b, engine, r.loadRow, off.loadRow)
		}
	}
}
