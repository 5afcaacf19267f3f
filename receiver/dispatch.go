package receiver

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// DispatchStore is what the dispatcher needs of storage: a durable queue of accepted
// events, so that nothing waits in memory alone. LeaseDue, LeaseFirstDue and
// FinishAttempt return an error wrapping storage.ErrFileGone once the database file has
// left its path.
type DispatchStore interface {
	LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error)
	LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error)
	FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error)
	YieldLease(ctx context.Context, job storage.Job) (bool, error)
	NextDue(ctx context.Context, sources []string) (time.Time, error)
	DispatcherSeen(ctx context.Context, id string, forwarding []string, now time.Time) error
	ForwardedSources(ctx context.Context, since time.Time) ([]string, error)
	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)
}

// DispatchConfig wires a Dispatcher.
type DispatchConfig struct {
	Store   DispatchStore
	Sources []Source
	// Workers is how many attempts run at once; default 8, one more for each source
	// that forwards past the second, and one more when there are sources without a
	// forward_url, whose settlements are owed one (sharedWorkers).
	Workers int
	// StuckAfter is how long a key may stay processing before it counts as stuck.
	StuckAfter time.Duration
	// Poll is the longest the dispatcher sleeps without a wake-up, so that work queued
	// by another process (the CLI's reprocess) is found; default 1s.
	Poll time.Duration
	// FirstBackoff is the wait after the first failed attempt; it doubles after each
	// one. Default 1s.
	FirstBackoff time.Duration
	// RecordOnlyAfter is how long a queued key of a source without a forward_url has
	// been due before this dispatcher settles it as processed, unsent, provided no
	// dispatcher seen within ForwarderGone forwards the source: the margin for a
	// replica that began forwarding it between that look and the lease. Default 2s.
	RecordOnlyAfter time.Duration
	// ForwarderGone is how long after a dispatcher was last seen its sources count as
	// forwarded by no one. It is renewed every ForwarderGone/6. Default 30s.
	ForwarderGone time.Duration
	Client        *http.Client
	Logger        *slog.Logger
	Metrics       *Metrics
	Now           func() time.Time
}

// Dispatcher hands accepted events to their source's forward_url, once each, retrying
// with exponential backoff and jitter, and records every attempt.
type Dispatcher struct {
	cfg     DispatchConfig
	sources map[string]*Source
	// secrets holds, by source, what of its forward_url the console masks
	// (forwardSecrets): a downstream's answer may echo it, and the excerpt stored with
	// an attempt is shown to every viewer.
	secrets map[string][]string
	// forwarding and recordOnly name the configured sources with and without a
	// forward_url. Only their keys are leased: a key of a source this configuration
	// does not have belongs to a replica whose configuration has it (during a rolling
	// change of the sources), and is never settled or failed here; a key of a
	// record-only source is settled only while no other dispatcher forwards it.
	forwarding, recordOnly []string
	// id names this dispatcher among those that record what they forward.
	id string
	// elsewhere holds the record-only sources that other dispatchers were last seen
	// forwarding (ForwardedElsewhere).
	elsewhere atomic.Pointer[[]string]
	// looked says that Look has run: Run then does not look again at once.
	looked atomic.Bool
	lease  time.Duration
	wake   chan struct{}
	log    *slog.Logger

	// kept holds, by key, the outcome of an attempt made whose record failed (a full
	// disk): the downstream took the event, or refused it, and only the database does
	// not know. It is recorded again until it is (keepRecording), and a later lease of
	// the same job records it rather than handing the event off a second time.
	keptMu sync.Mutex
	kept   map[keptKey]*keptOutcome
	// flying holds, by job, the attempts this dispatcher has under way, each with the
	// newest lease of its job. A lease runs out by the clock, and a clock stepped
	// forward during an attempt makes the lease look over while the hand-off is still
	// open: the job leased again here is not handed off a second time, the attempt
	// under way records its outcome against the newer lease (fly, land).
	flyingMu sync.Mutex
	flying   map[keptKey]*storage.Job
	// seenFailures logs the failures of lookAround, which fail alike every
	// ForwarderGone/6 while the database cannot store. lookAround runs in one goroutine
	// at a time: Look's, then Run's.
	seenFailures *outage.Log

	// busy counts, by forwarding source, its attempts under way. A downstream that hangs
	// holds each of its attempts for attempt_timeout, and the workers it holds are no
	// one else's: so every forwarding source is owed one worker, and a source with
	// attempts under way starts another only on a spare worker, free and not owed to a
	// source with nothing under way (share). However many downstreams hang, as long as
	// there are more workers than hung downstreams, any other source's event finds a
	// worker at once rather than waiting for an attempt to time out and then behind
	// their whole queues. A cap per source would not do: two hung sources, each below
	// it, could still take every worker between them. The price: with as many
	// forwarding sources as workers or more, each has one attempt under way at a time.
	busyMu sync.Mutex
	busy   map[string]int
	// settling counts the settlements of record-only keys under way. They need a
	// worker too, and share as one more source does: while there are record-only
	// sources they are owed a worker, so that reprocessing such a key (the console, or
	// `hookdedup release --reprocess`) is settled at once beside a hung downstream
	// rather than after its attempt_timeout, and with settlements under way they start
	// more only on spare workers.
	settling int
}

// keptKey names the job whose attempt's outcome is kept: its key, claim, generation,
// reprocess and attempt count, which a later lease of the same job repeats.
type keptKey struct {
	source, key         string
	claim, gen, updated int64
	attempts            int
}

func keptKeyOf(j storage.Job) keptKey {
	return keptKey{j.Source, j.Key, j.ClaimID, j.Generation.UnixMilli(), j.Updated.UnixMilli(), j.Attempts}
}

// keptOutcome is an attempt's outcome not recorded yet, and the job it was of.
type keptOutcome struct {
	job storage.Job
	a   storage.Attempt
	res storage.AttemptResult
}

// responseExcerpt bounds how much of a downstream answer is kept per attempt.
const responseExcerpt = 1024

// answerHeaderMax bounds the headers of a downstream's answer: past it the attempt
// fails, as a downstream that answers so is broken or hostile.
const answerHeaderMax = 64 << 10

// NewDispatcher returns a Dispatcher for cfg.
func NewDispatcher(cfg DispatchConfig) *Dispatcher {
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 10 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.FirstBackoff <= 0 {
		cfg.FirstBackoff = time.Second
	}
	if cfg.Client == nil {
		// net/http would read up to 10 MiB of an answer's headers, in every worker at
		// once; only the status and Retry-After are used.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxResponseHeaderBytes = answerHeaderMax
		cfg.Client = &http.Client{Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dispatcher{
		cfg:     cfg,
		sources: make(map[string]*Source, len(cfg.Sources)),
		secrets: make(map[string][]string, len(cfg.Sources)),
		wake:    make(chan struct{}, 1),
		log:     cfg.Logger.With(logComponent, "dispatch"),
	}
	d.seenFailures = outage.New(d.log, slog.LevelWarn, "recording what this dispatcher forwards failed",
		"recording what this dispatcher forwards works again")
	// A lease outlasts the longest attempt and the write that records it, so no two
	// dispatchers hold one job at once; it is also how long a job leased by a process
	// that died waits before another takes it.
	const margin = 10 * time.Second
	d.lease = margin
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		d.sources[s.Name] = s
		if s.ForwardURL == "" {
			d.recordOnly = append(d.recordOnly, s.Name)
			continue
		}
		d.forwarding = append(d.forwarding, s.Name)
		d.secrets[s.Name] = forwardSecrets(s.ForwardURL)
		if l := s.AttemptTimeout + margin; l > d.lease {
			d.lease = l
		}
	}
	if d.cfg.Workers <= 0 {
		d.cfg.Workers = sharedWorkers(len(d.forwarding), len(d.recordOnly) > 0)
	}
	if d.cfg.RecordOnlyAfter <= 0 {
		d.cfg.RecordOnlyAfter = 2 * time.Second
	}
	if d.cfg.ForwarderGone <= 0 {
		d.cfg.ForwarderGone = 30 * time.Second
	}
	d.id = crand.Text()
	// Non-nil, so that a configuration with none leases none rather than every source's.
	if d.forwarding == nil {
		d.forwarding = []string{}
	}
	if d.recordOnly == nil {
		d.recordOnly = []string{}
	}
	d.busy = make(map[string]int, len(d.forwarding))
	return d
}

// sharedWorkers is the default number of workers for forwarding sources: 8, and one
// more for each past the second. Each is owed a worker (share), so with a fixed 8 a
// source beside seven others would have one attempt under way at a time, and a burst
// of one channel manager (months of reservations re-sent at once) would go downstream
// one hand-off after another. With these, a source holds up to seven attempts beside
// any number of others, as it does beside one, and each of the others still finds a
// worker at once. The settlements of record-only sources, when there are any, are owed
// a worker as well, and have one more of their own: a forwarding source holds as many
// attempts beside them as without them.
func sharedWorkers(forwarding int, recordOnly bool) int {
	n := max(8, forwarding+6)
	if recordOnly {
		n++
	}
	return n
}

// share splits the forwarding sources into those with nothing under way (idle, never
// nil: a lease of nil sources takes every source's keys) and the others (busy), and
// returns how many of free workers are spare: not owed to an idle source, nor to the
// record-only settlements while there are record-only sources and none of their
// settlements is under way (settleOwed). It is negative when more are owed a worker
// than workers are free. The caller holds busyMu.
func (d *Dispatcher) share(free int) (idle, busy []string, spare int) {
	idle = make([]string, 0, len(d.forwarding))
	for _, s := range d.forwarding {
		if d.busy[s] == 0 {
			idle = append(idle, s)
		} else {
			busy = append(busy, s)
		}
	}
	spare = free - len(idle)
	if d.settleOwed() {
		spare--
	}
	return idle, busy, spare
}

// settleOwed reports whether the record-only settlements are owed a worker: there are
// record-only sources, and none of their settlements is under way. The caller holds
// busyMu.
func (d *Dispatcher) settleOwed() bool {
	return len(d.recordOnly) > 0 && d.settling == 0
}

// settleRoom is how many of free workers the record-only settlements may take, once
// the forwarding sources' jobs leased for them (leased) start: the worker they are owed
// while none is under way, even when no worker is spare (as a source with nothing under
// way takes its first job), and the workers spare.
func (d *Dispatcher) settleRoom(free int, leased []storage.Job) int {
	d.busyMu.Lock()
	idle, _, spare := d.share(free)
	owed := d.settleOwed()
	d.busyMu.Unlock()
	// A leased job of a source with nothing under way takes the worker that source is
	// owed; every other takes a spare one.
	firsts := map[string]bool{}
	for _, j := range leased {
		if slices.Contains(idle, j.Source) {
			firsts[j.Source] = true
		}
	}
	spare -= len(leased) - len(firsts)
	if owed {
		spare = max(spare+1, 1)
	}
	return max(0, min(spare, free-len(leased)))
}

// unheld is how many workers no attempt or settlement holds. The caller holds busyMu.
func (d *Dispatcher) unheld() int {
	n := d.cfg.Workers - d.settling
	for _, b := range d.busy {
		n -= b
	}
	return n
}

// start counts an attempt of source (or a settlement, for a record-only source) as
// under way; its end (the function returned) wakes the loop when no worker was spare,
// so that the keys of the busy sources, left unleased meanwhile, are leased at once (or
// this source's, owed a worker again).
func (d *Dispatcher) start(source string) (end func()) {
	forwarding := slices.Contains(d.forwarding, source)
	d.busyMu.Lock()
	if forwarding {
		d.busy[source]++
	} else {
		d.settling++ // a record-only settlement: nothing is sent
	}
	d.busyMu.Unlock()
	return func() {
		d.busyMu.Lock()
		_, _, spare := d.share(d.unheld())
		if forwarding {
			d.busy[source]--
		} else {
			d.settling--
		}
		d.busyMu.Unlock()
		if spare <= 0 {
			d.Wake()
		}
	}
}

// Wake tells the dispatcher that work may be due. It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for the attempts in flight (each bounded by
// its source's attempt_timeout) so that their outcome is recorded.
func (d *Dispatcher) Run(ctx context.Context) {
	// Once the attempts in flight are over (deferred calls run last first): their
	// outcomes too are recorded, or said not to be.
	defer d.reportKept()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, d.cfg.Workers)
	paused := false // the database file left its path; said once
	go d.reportStuck(ctx)
	// Before the first lease (unless serve's Look just did), and then every
	// ForwarderGone/6.
	if !d.looked.Load() {
		d.lookAround(ctx)
	}
	wg.Go(func() {
		t := time.NewTicker(d.cfg.ForwarderGone / 6)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				d.lookAround(ctx)
			}
		}
	})
	failures := 0 // leases failed in a row
	// While the disk is full every turn of the loop fails alike.
	leaseLog := outage.New(d.log, slog.LevelWarn, "lease failed", "leases work again")
	for ctx.Err() == nil {
		// Lease only as many jobs as there are free workers: a leased job waiting for a
		// worker would burn its lease.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	fill:
		for free < d.cfg.Workers {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break fill
			}
		}
		// Before a lease: a lease that took a kept outcome's key over would have it
		// recorded through that one (takeKept), as a second attempt in its history.
		d.recordKept(context.WithoutCancel(ctx))
		jobs, err := d.leaseDue(ctx, free)
		switch {
		case ctx.Err() != nil:
		case err == nil:
			leaseLog.Note(time.Now(), nil)
		case errors.Is(err, storage.ErrFileGone):
			// Nothing is leased, so nothing is sent and no attempt is counted: the
			// keys wait, in the file that left, for a restart with it back in place.
			if !paused {
				d.log.Error("dispatch paused: the database file is no longer at its path; "+
					"keys resume after a restart with the file back in place", logErr, err)
				paused = true
			}
		default:
			leaseLog.Note(time.Now(), err)
		}
		for _, job := range jobs {
			free--
			if d.leaseTooShort(job, d.cfg.Now()) {
				// Given back before the next lease, which would take the key over as
				// interrupted, listing a hand-off that was never made.
				if d.fly(job) {
					d.yield(context.WithoutCancel(ctx), job)
				}
				<-slots
				continue
			}
			end := d.start(job.Source)
			wg.Go(func() {
				defer func() { <-slots }()
				defer end()
				if !d.fly(job) {
					return // being handed off or recorded already: that records against this lease
				}
				if o := d.takeKept(job); o != nil {
					// Handed off already: its outcome is recorded, not the event sent again.
					d.finish(context.WithoutCancel(ctx), job, o.a, o.res)
					return
				}
				d.attempt(context.WithoutCancel(ctx), job)
			})
		}
		for range free {
			<-slots
		}
		if err == nil {
			failures = 0
		}
		switch {
		case len(jobs) > 0 && err == nil:
			continue // there may be more due
		case err != nil && ctx.Err() == nil:
			// A lease that failed fails again at once (a full disk): not every 10 ms
			// that a due key would have the loop wait.
			failures++
			t := time.NewTimer(backoff(failures, 100*time.Millisecond, 5*time.Second))
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		d.sleep(ctx)
	}
}

// takeKept removes and returns the outcome kept for job when it is of this very job
// (the same claim, generation, reprocess and attempt count, leased again once its lease
// ran out); nil otherwise. An outcome kept of another job of the key (a reprocess or a
// new claim since) stays kept, and recordKept records it against its own job, whose
// record leaves the key as it is now and puts the attempt in its history.
func (d *Dispatcher) takeKept(job storage.Job) *keptOutcome {
	d.keptMu.Lock()
	defer d.keptMu.Unlock()
	k := keptKeyOf(job)
	o := d.kept[k]
	delete(d.kept, k)
	return o
}

// fly notes that an attempt of job, or the record of its kept outcome, is about to
// start, and reports whether it should: not when one of the same job (keptKeyOf) is
// under way in this dispatcher, whose lease ran out by the clock before it ended. That
// one then records its outcome against job, the newer lease (finish). The job stays
// flying until its outcome is recorded or kept: a lease in between would find neither
// the attempt nor its outcome, and hand the event off again.
func (d *Dispatcher) fly(job storage.Job) bool {
	d.flyingMu.Lock()
	defer d.flyingMu.Unlock()
	k := keptKeyOf(job)
	if newest, ok := d.flying[k]; ok {
		*newest = job
		return false
	}
	if d.flying == nil {
		d.flying = map[keptKey]*storage.Job{}
	}
	d.flying[k] = &job
	return true
}

// newest returns the newest lease of the job that fly started, which its outcome is
// recorded against.
func (d *Dispatcher) newest(job storage.Job) storage.Job {
	d.flyingMu.Lock()
	defer d.flyingMu.Unlock()
	if newest, ok := d.flying[keptKeyOf(job)]; ok {
		return *newest
	}
	return job
}

// land ends what fly started for job, whose outcome was recorded (or kept) against
// job's lease, and reports whether it did: not when the job was leased again meanwhile,
// whose lease the outcome must be recorded against too.
func (d *Dispatcher) land(job storage.Job) bool {
	d.flyingMu.Lock()
	defer d.flyingMu.Unlock()
	k := keptKeyOf(job)
	if newest, ok := d.flying[k]; ok && !newest.Lease.Equal(job.Lease) {
		return false
	}
	delete(d.flying, k)
	return true
}

// finish records the outcome of an attempt of job, against the newest lease of the job
// (newest), and ends what fly started. It returns the job it recorded against, and
// record's answer.
func (d *Dispatcher) finish(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (storage.Job, bool, error) {
	for {
		if newest := d.newest(job); !newest.Lease.Equal(job.Lease) {
			// Leased again while under way: the newer lease recorded this attempt as
			// interrupted. The outcome takes that row's place first, against this lease
			// (which moves the key no further), then moves the key on under the newer
			// one without listing it again: the history lists the one hand-off once. If
			// the first record fails, the second lists it, beside that row.
			if !res.Listed {
				if _, err := d.cfg.Store.FinishAttempt(ctx, job, a, res); err == nil {
					res.Listed = true
				}
			}
			job = newest
		}
		moved, err := d.record(ctx, job, a, res)
		if d.land(job) {
			return job, moved, err
		}
		// Leased again during the record: a record that went through listed the
		// attempt already, against the lease the newer one takes over.
		res.Listed = res.Listed || err == nil
	}
}

// record records the outcome of an attempt of job, and reports whether it moved the key
// on. When the record fails for any reason but the file's leaving its path (a full
// disk, an I/O error), the outcome is kept (errKept): Run records it again before each
// lease until it is, and a later lease of the job records it (takeKept), so that the
// event is handed off a second time only across a restart, never for want of a record.
func (d *Dispatcher) record(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	moved, err := d.cfg.Store.FinishAttempt(ctx, job, a, res)
	if err == nil || errors.Is(err, storage.ErrFileGone) {
		return moved, err
	}
	d.keptMu.Lock()
	if d.kept == nil {
		d.kept = map[keptKey]*keptOutcome{}
	}
	d.kept[keptKeyOf(job)] = &keptOutcome{job: job, a: a, res: res}
	d.keptMu.Unlock()
	d.log.Error("recording attempt failed; its outcome is kept and recorded again until it is, the event not handed off again",
		logSource, job.Source, logKey, job.Key, logErr, err)
	return false, errKept
}

// recordKept records the outcomes kept since their records failed. It stops at the
// first that fails again: the others would fail alike (a disk still full), each after
// the busy timeout.
func (d *Dispatcher) recordKept(ctx context.Context) {
	d.keptMu.Lock()
	kept := slices.Collect(maps.Values(d.kept))
	d.keptMu.Unlock()
	for _, o := range kept {
		_, err := d.cfg.Store.FinishAttempt(ctx, o.job, o.a, o.res)
		if err != nil && !errors.Is(err, storage.ErrFileGone) {
			return
		}
		d.keptMu.Lock()
		if k := keptKeyOf(o.job); d.kept[k] == o {
			delete(d.kept, k)
		}
		d.keptMu.Unlock()
		if err != nil {
			d.log.Warn("attempt not recorded: the database file is no longer at its path; its event is handed off again, with the same Idempotency-Key, after a restart with the file back",
				logSource, o.job.Source, logKey, o.job.Key)
			continue
		}
		d.log.Info("attempt recorded after all", logSource, o.job.Source, logKey, o.job.Key)
	}
}

// reportKept records, once Run is over, the outcomes still kept, and says which could
// not be: their events are handed off again after a restart.
func (d *Dispatcher) reportKept() {
	d.recordKept(context.Background())
	d.keptMu.Lock()
	defer d.keptMu.Unlock()
	for _, o := range d.kept {
		d.log.Error("attempt not recorded at shutdown: its event is handed off again, with the same Idempotency-Key, after a restart",
			logSource, o.job.Source, logKey, o.job.Key)
	}
}

// errKept says that an attempt's record failed and its outcome is kept (record).
var errKept = errors.New("attempt not recorded yet: its outcome is kept")

// leaseDue leases up to limit due jobs of the configured sources: the forwarding
// sources' first, then, on the workers their share leaves them (settleRoom), the keys
// of record-only sources that no other dispatcher forwards and that have been due for
// RecordOnlyAfter.
func (d *Dispatcher) leaseDue(ctx context.Context, limit int) ([]storage.Job, error) {
	now := d.cfg.Now()
	jobs, err := d.leaseForwarded(ctx, now, limit)
	if err != nil || len(jobs) == limit {
		return jobs, err
	}
	room := d.settleRoom(limit, jobs)
	if room == 0 {
		return jobs, nil
	}
	settle, err := d.settleable(ctx, now)
	if err != nil {
		return jobs, err
	}
	// Due at now-RecordOnlyAfter, leased until now+lease as every other job.
	more, err := d.cfg.Store.LeaseDue(ctx, now.Add(-d.cfg.RecordOnlyAfter), d.lease+d.cfg.RecordOnlyAfter,
		room, settle)
	return append(jobs, more...), err
}

// leaseForwarded leases up to free due jobs of the forwarding sources, none past its
// share (share). The sources with nothing under way go first, up to one job more than
// the spare workers: each source's first job takes its owed worker, and at least one of
// them is a first, so that no more than the spare ones go to second jobs. Then, on the
// workers still spare, any source's jobs, oldest first. Each source thus takes what its
// share leaves it room for, not what the fullest source has room for.
//
// With no worker spare, every free worker is owed to a source with nothing under way:
// those sources are leased a job each, in one lease (LeaseFirstDue), and so are those
// that the first two steps left out when the first took its fill. Bounded by the spare
// workers alone, the first step would lease them one job a lease: a hundred quiet
// sources beside a busy one waited for a hundred lease round trips.
func (d *Dispatcher) leaseForwarded(ctx context.Context, now time.Time, free int) ([]storage.Job, error) {
	d.busyMu.Lock()
	idle, busy, spare := d.share(free)
	d.busyMu.Unlock()
	if spare <= 0 {
		return d.cfg.Store.LeaseFirstDue(ctx, now, d.lease, free, idle)
	}
	limit := min(free, spare+1)
	jobs, err := d.cfg.Store.LeaseDue(ctx, now, d.lease, limit, idle)
	if err != nil {
		return jobs, err
	}
	firsts := map[string]bool{}
	for _, j := range jobs {
		firsts[j.Source] = true
	}
	spare -= len(jobs) - len(firsts)
	// Short of the limit, the first lease took every job due of the idle sources.
	full := len(jobs) == limit
	// With no source busy, nothing else is due: a quiet turn (one event accepted) costs
	// one lease, as it did.
	if !full && len(busy) == 0 {
		return jobs, nil
	}
	if spare > 0 {
		more, err := d.cfg.Store.LeaseDue(ctx, now, d.lease, spare, d.forwarding)
		if jobs = append(jobs, more...); err != nil {
			return jobs, err
		}
		for _, j := range more {
			firsts[j.Source] = true
		}
	}
	if !full {
		return jobs, nil
	}
	// The idle sources the leases left out may have jobs due, each on the worker it is
	// owed, which the share has left free.
	var rest []string
	for _, s := range idle {
		if !firsts[s] {
			rest = append(rest, s)
		}
	}
	if room := min(free-len(jobs), len(rest)); room > 0 {
		more, err := d.cfg.Store.LeaseFirstDue(ctx, now, d.lease, room, rest)
		jobs = append(jobs, more...)
		return jobs, err
	}
	return jobs, nil
}

// settleable returns the record-only sources whose keys this dispatcher may settle
// unsent: those no dispatcher seen within ForwarderGone forwards.
func (d *Dispatcher) settleable(ctx context.Context, now time.Time) ([]string, error) {
	if len(d.recordOnly) == 0 {
		return d.recordOnly, nil
	}
	forwarded, err := d.cfg.Store.ForwardedSources(ctx, now.Add(-d.cfg.ForwarderGone))
	if err != nil {
		return nil, err
	}
	var elsewhere []string
	for _, s := range d.recordOnly {
		if slices.Contains(forwarded, s) {
			elsewhere = append(elsewhere, s)
		}
	}
	d.elsewhere.Store(&elsewhere)
	return d.unforwarded(), nil
}

// unforwarded is recordOnly less the sources ForwardedElsewhere last found forwarded.
func (d *Dispatcher) unforwarded() []string {
	settle := make([]string, 0, len(d.recordOnly))
	for _, s := range d.recordOnly {
		if !d.ForwardedElsewhere(s) {
			settle = append(settle, s)
		}
	}
	return settle
}

// ForwardedElsewhere reports whether source, which this configuration has without a
// forward_url, was last seen forwarded by another replica's dispatcher: intake then
// queues its deliveries for that one rather than settling them at once. It never
// blocks: it reads what the dispatcher last found, at most ForwarderGone/6 ago. Before
// the dispatcher has first looked it cannot say, and answers yes: a delivery settled
// unsent while another replica forwards its source would never reach the downstream,
// where one queued is settled by this dispatcher RecordOnlyAfter later if no one does.
func (d *Dispatcher) ForwardedElsewhere(source string) bool {
	p := d.elsewhere.Load()
	return p == nil || slices.Contains(*p, source)
}

// Look does what Run does first: records what this dispatcher forwards and finds which
// of its sources without a forward_url another replica forwards. serve calls it before
// intake serves, so that a delivery of such a source is settled at once, as usual,
// rather than queued until the first look (ForwardedElsewhere).
func (d *Dispatcher) Look(ctx context.Context) {
	d.lookAround(ctx)
	d.looked.Store(true)
}

// lookAround records what this dispatcher forwards, several times within ForwarderGone
// so that a write that fails now and then does not make its sources look forwarded by
// no one: a replica that has them without a forward_url must leave their keys to this
// one, however long it takes to work through them. It also keeps ForwardedElsewhere
// current, even while the dispatcher is too busy with its own sources to look.
func (d *Dispatcher) lookAround(ctx context.Context) {
	if len(d.forwarding) > 0 {
		err := d.cfg.Store.DispatcherSeen(ctx, d.id, d.forwarding, d.cfg.Now())
		if ctx.Err() == nil && !errors.Is(err, storage.ErrFileGone) {
			d.seenFailures.Note(time.Now(), err)
		}
	}
	if len(d.recordOnly) > 0 {
		d.settleable(ctx, d.cfg.Now())
	}
}

// nextDue is when the earliest job leaseDue would take falls due, or the zero time.
func (d *Dispatcher) nextDue(ctx context.Context) (time.Time, error) {
	// A busy source, while no worker is spare, is left out: its keys are leased once an
	// attempt ends, which wakes the loop (start). So are the record-only keys while
	// settlements are under way and no worker is spare.
	d.busyMu.Lock()
	open, busy, spare := d.share(d.unheld())
	settling := d.settling > 0 && spare <= 0
	d.busyMu.Unlock()
	if spare > 0 {
		open = append(open, busy...)
	}
	next, err := d.cfg.Store.NextDue(ctx, open)
	if err != nil {
		return time.Time{}, err
	}
	if settling {
		return next, nil
	}
	// Who forwards as last read: this only times the next look, and leaseDue reads
	// afresh before it settles anything (and keeps what it read for the next sleep).
	rec, err := d.cfg.Store.NextDue(ctx, d.unforwarded())
	if err != nil {
		return time.Time{}, err
	}
	if rec.IsZero() {
		return next, nil
	}
	rec = rec.Add(d.cfg.RecordOnlyAfter)
	if next.IsZero() || rec.Before(next) {
		return rec, nil
	}
	return next, nil
}

// sleep waits for a wake-up, the next due job, or the poll interval.
func (d *Dispatcher) sleep(ctx context.Context) {
	wait := d.cfg.Poll
	if next, err := d.nextDue(ctx); err == nil && !next.IsZero() {
		if until := next.Sub(d.cfg.Now()); until < wait {
			wait = max(until, 10*time.Millisecond)
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-t.C:
	}
}

// backoff is the wait before attempt n+1 after n failed ones: first, 2×first, 4×first …
// each ±20 % so that a recovering downstream is not hit by every retry at once, and
// never more than max.
func backoff(n int, first, max time.Duration) time.Duration {
	b := first
	for i := 1; i < n && b < max; i++ {
		b *= 2
	}
	// Jittered, then capped: max_backoff is the longest wait, as documented.
	return min(time.Duration(float64(min(b, max))*(0.8+0.4*rand.Float64())), max)
}

func (d *Dispatcher) attempt(ctx context.Context, job storage.Job) {
	src := d.sources[job.Source]
	start := d.cfg.Now()
	a := storage.Attempt{Source: job.Source, Key: job.Key, Delivery: job.Delivery, StartedAt: start}
	res := storage.AttemptResult{}
	problem := payloadProblem(job)
	switch {
	case src.ForwardURL == "":
		// A record-only source (or one whose forward_url was removed) that no
		// dispatcher forwards: there is nothing to hand off, so reprocessing it
		// completes.
		a.Response = "record only: the source has no forward_url"
		res.Done, res.Unsent = true, true
	case problem != "":
		// Retrying cannot bring a payload back; sending anything else would hand the
		// downstream an empty or foreign event under this key's Idempotency-Key.
		a.Error = problem
		res.Failed = true
	case d.leaseTooShort(job, start):
		d.yield(ctx, job)
		return
	default:
		var wait time.Duration
		a.Status, a.Response, a.Error, wait = d.post(ctx, src, job)
		a.Duration = d.cfg.Now().Sub(start)
		n := job.Attempts + 1
		switch {
		case a.Error == "":
			res.Done = true
		case n >= src.MaxAttempts:
			res.Failed = true
		default:
			// A downstream that says how long to leave it alone is left that long, up to
			// max_backoff: a wait of its own choosing must not park the key for good.
			res.NextAt = d.cfg.Now().Add(max(backoff(n, d.cfg.FirstBackoff, src.MaxBackoff), min(wait, src.MaxBackoff)))
		}
	}
	res.LastError = a.Error
	result := "success"
	switch {
	case res.Failed:
		result = "failed"
	case !res.Done:
		result = "retry"
	}
	// A settlement with nothing sent (record only) is no hand-off, as the key's count
	// of attempts says: counted, it would show a downstream taking events it never had.
	if !res.Unsent {
		d.cfg.Metrics.DispatchAttempts.WithLabelValues(job.Source, result).Inc()
	}
	job, moved, err := d.finish(ctx, job, a, res)
	switch {
	case errors.Is(err, storage.ErrFileGone):
		// Not recorded where it will be found: after a restart with the file back, the
		// lease ends and the job is tried again, with the same Idempotency-Key.
		d.log.Warn("attempt not recorded: the database file is no longer at its path",
			logSource, job.Source, logKey, job.Key)
	case err != nil:
		// Said by record, which keeps the outcome (errKept).
	case !moved:
		d.log.Info("key changed during its attempt; left as it is", logSource, job.Source, logKey, job.Key)
	case res.Failed:
		d.log.Warn("dispatch failed for good", logSource, job.Source, logKey, job.Key, logAttempts, job.Attempts+1, logErr, a.Error)
	case !res.Done:
		d.log.Info("dispatch will retry", logSource, job.Source, logKey, job.Key, logAttempts, job.Attempts+1, logNext, res.NextAt, logErr, a.Error)
	}
}

// leaseTooShort reports whether job's lease, at now, no longer covers a hand-off of its
// source's attempt_timeout. The process stalled since the lease (a paused virtual
// machine, a suspend), or the clock leapt forward: the lease would run out during the
// hand-off, or has, and another dispatcher may have leased the key and sent it already.
// Nothing is sent under such a lease.
func (d *Dispatcher) leaseTooShort(job storage.Job, now time.Time) bool {
	src := d.sources[job.Source]
	return src != nil && src.ForwardURL != "" && now.Add(src.AttemptTimeout).After(job.Lease)
}

// yield gives back, unused, the lease of job that fly started (the newest, when the job
// was leased again meanwhile), and ends what fly started: the key falls due at once,
// with no attempt listed, as nothing was handed off.
func (d *Dispatcher) yield(ctx context.Context, job storage.Job) {
	for {
		job = d.newest(job)
		given, err := d.cfg.Store.YieldLease(ctx, job)
		switch {
		case err != nil:
			d.log.Warn("giving back a lease too short for the hand-off failed; the key is tried again once it runs out",
				logSource, job.Source, logKey, job.Key, logErr, err)
		case given:
			d.log.Warn("lease too short for the hand-off (the process stalled, or the clock leapt forward, since it was leased): nothing sent, the key is leased again",
				logSource, job.Source, logKey, job.Key)
		}
		if d.land(job) {
			return
		}
	}
}

// payloadProblem says why job's payload must not be sent, or "" when it may: it must be
// stored, and be the delivery of the job's own source and key.
func payloadProblem(job storage.Job) string {
	switch {
	case !job.Stored:
		return fmt.Sprintf("payload missing: delivery %d is no longer stored; nothing was sent", job.Delivery)
	case job.DeliverySource != job.Source || job.DeliveryKey != job.Key:
		return fmt.Sprintf("payload mismatch: delivery %d belongs to %s/%s, not to this key; nothing was sent",
			job.Delivery, job.DeliverySource, job.DeliveryKey)
	}
	return ""
}

// post makes one hand-off and returns the status, an excerpt of the answer, what went
// wrong ("" on a 2xx), and how long a downstream that answered 429 or 503 asked to be
// left alone (Retry-After; 0 when it did not say).
func (d *Dispatcher) post(ctx context.Context, src *Source, job storage.Job) (int, string, string, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, src.AttemptTimeout)
	defer cancel()
	secrets := d.secrets[job.Source]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, src.ForwardURL, bytes.NewReader(job.Body))
	if err != nil {
		return 0, "", attemptError(err, secrets), 0
	}
	// net/http silently resends a request that carries an Idempotency-Key when its
	// connection breaks before the answer; without GetBody it cannot. Every hand-off is
	// then one recorded attempt, and retries follow our backoff, not the transport's.
	req.GetBody = nil
	ct := job.ContentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Idempotency-Key", idempotencyKey(job.Source, job.Key))
	req.Header.Set("X-Hookdedup-Source", job.Source)
	req.Header.Set("X-Hookdedup-Delivery", strconv.FormatInt(job.Delivery, 10))
	if job.Batch != 0 {
		// The body is one item of a request that carried several: these name that
		// request (its first item's delivery) and the item's place in it.
		req.Header.Set("X-Hookdedup-Batch", strconv.FormatInt(job.Batch, 10))
		req.Header.Set("X-Hookdedup-Batch-Index", strconv.Itoa(job.BatchIndex))
		setEnvelope(req.Header, job.BatchEnvelope)
	}
	req.Header.Set("User-Agent", "hookdedup")
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, "", fmt.Sprintf("no answer within %s", src.AttemptTimeout), 0
		}
		return 0, "", attemptError(err, secrets), 0
	}
	defer resp.Body.Close()
	// A 101 answer hands over the raw connection, which net/http no longer watches the
	// request's context for: a downstream that then sends nothing would hold the read,
	// and the attempt, for good. Every read of the answer ends with the attempt's time.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	// The status line is the downstream's text, as its answer is: it may quote the URL.
	answered := "downstream answered " + statusText(resp.Status, secrets)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "", answered + ": a hand-off is a plain POST", 0
	}
	// Read past the excerpt by the longest secret, each of its characters escaped at
	// the longest, so that one begun within it is masked whole before the cut.
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, int64(responseExcerpt+maxEscaped*longest(secrets))))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	text := strings.ToValidUTF8(maskedPrefix(string(excerpt), secrets, responseExcerpt), "\uFFFD")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var wait time.Duration
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			wait = retryAfter(resp.Header.Get("Retry-After"), d.cfg.Now())
		}
		return resp.StatusCode, text, answered, wait
	}
	return resp.StatusCode, text, "", 0
}

// statusMax bounds how much of a downstream's status line an attempt's error quotes:
// net/http takes one as long as the answer's headers may be (answerHeaderMax), and
// the error is stored with every attempt and listed with the key's.
const statusMax = 256

// statusText is a downstream's status line as an attempt's error stores it: its first
// statusMax bytes, cut on a character and followed by "…" when there is more, with
// secrets masked (maskedPrefix), and each control character (C0, DEL, C1) and each
// byte that is not UTF-8 as U+FFFD. net/http keeps the reason phrase as the downstream
// wrote it, and the error is printed by `hookdedup keys` on an operator's terminal, in
// tab-separated columns, where an escape sequence would act and a tab shift the columns.
func statusText(status string, secrets []string) string {
	n := len(status)
	if n > statusMax {
		n = statusMax
		for n > 0 && !utf8.RuneStart(status[n]) {
			n--
		}
	}
	text := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f {
			return utf8.RuneError
		}
		return r
	}, maskedPrefix(status, secrets, n))
	if n < len(status) {
		text += "…"
	}
	return text
}

// minSecret is the shortest part of a forward_url that maskedPrefix masks in an answer:
// a shorter query value ("?v=2") is no credential, and masking it would blot out the
// answer's text wherever it occurs.
const minSecret = 6

// forwardSecrets returns what of forward_url raw the console masks (web's RedactURL,
// storage.RedactPath), as written and as decoded, longest first: the password, or the
// user name standing for a token, and the Basic credentials net/http sends of them;
// each query value, or a parameter without one whole; each path segment that may be a
// token.
func forwardSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	add := func(escaped string, unescape func(string) (string, error)) {
		forms := []string{escaped}
		if s, err := unescape(escaped); err == nil {
			forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s))
		}
		for _, f := range forms {
			if len(f) >= minSecret && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	plain := func(s string) (string, error) { return s, nil }
	if u.User != nil {
		pw, ok := u.User.Password()
		if ok {
			add(pw, plain)
		} else {
			add(u.User.Username(), plain)
		}
		// net/http sends them as "Authorization: Basic " and the base64 of
		// "user:password": a downstream that echoes the request's headers (an error page
		// that dumps them) quotes the credential so, one decoding away.
		basic := []byte(u.User.Username() + ":" + pw)
		add(base64.StdEncoding.EncodeToString(basic), plain)
		add(base64.RawStdEncoding.EncodeToString(basic), plain)
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(p, "=")
		if strings.Trim(v, "=") == "" {
			add(p, url.QueryUnescape)
			add(k, url.QueryUnescape)
			continue
		}
		add(v, url.QueryUnescape)
	}
	masked := *u
	storage.RedactPath(&masked)
	was, is := strings.Split(u.EscapedPath(), "/"), strings.Split(masked.EscapedPath(), "/")
	for i := range min(len(was), len(is)) {
		if is[i] == storage.RedactedSegment && was[i] != is[i] {
			add(was[i], url.PathUnescape)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// maskedPrefix returns the first n bytes of text, each of secrets (longest first) that
// begins among them, written whole as it is or escaped (matchEscaped), as
// storage.RedactedSegment. The cut is made in text as read, not in the masked text: a
// mask is shorter than its secret, and cutting the masked text would pull in the bytes
// after n, where the read may have cut a secret in two that no mask then matches. text
// holds n bytes and maxEscaped times the longest secret's length more, so that a secret
// begun before n is read whole.
func maskedPrefix(text string, secrets []string, n int) string {
	var b strings.Builder
	for i := 0; i < min(len(text), n); {
		masked := false
		for _, s := range secrets {
			if m := matchEscaped(text[i:], s); m > 0 {
				b.WriteString(storage.RedactedSegment)
				i += m
				masked = true
				break
			}
		}
		if !masked {
			b.WriteByte(text[i])
			i++
		}
	}
	return b.String()
}

// maxEscaped is the most bytes matchEscaped takes for one character of a secret:
// "&#x0002F;" and a digit more.
const maxEscaped = 10

// matchEscaped returns how many bytes at the start of text spell secret, 0 if they do
// not; the most, when they spell it more than one way. Each character of secret may be
// written as it is or escaped as HTML writes it (&amp;, &#x2F;, &#47;, &sol;) or JSON
// (\u0026, \/): a downstream that quotes the request's URL in a page or a JSON error
// writes the credential so, and each form is as much the secret as the plain one.
//
// An '&' or '\\' of text may begin an escape or be itself (a secret may hold "&amp;"
// as its own five characters), so text can spell a prefix of secret ending at several
// offsets: all of them are followed at once, character by character, never each way in
// turn, which a hostile answer of backslash runs made take exponential time.
func matchEscaped(text, secret string) int {
	if secret == "" || text == "" || text[0] != secret[0] && text[0] != '&' && text[0] != '\\' {
		return 0 // most offsets of an answer: no allocation for them
	}
	ends, next := []int{0}, []int(nil) // offsets of text where secret[:i] can end
	add := func(j int) {
		if !slices.Contains(next, j) {
			next = append(next, j)
		}
	}
	for i := 0; i < len(secret); {
		r, size := utf8.DecodeRuneInString(secret[i:])
		next = next[:0]
		for _, j := range ends {
			if strings.HasPrefix(text[j:], secret[i:i+size]) {
				add(j + size)
			}
			if got, n := escapedRune(text[j:]); n > 0 && got == r && (r != utf8.RuneError || size > 1) {
				add(j + n)
			}
		}
		if len(next) == 0 {
			return 0
		}
		ends, next = next, ends
		i += size
	}
	return slices.Max(ends)
}

// htmlNames are the named HTML character references of the characters a URL's
// credential may hold (the legacy upper-case spellings among them).
var htmlNames = map[string]rune{
	"amp": '&', "AMP": '&', "lt": '<', "LT": '<', "gt": '>', "GT": '>', "quot": '"', "QUOT": '"',
	"apos": '\'', "sol": '/', "equals": '=', "quest": '?', "colon": ':', "plus": '+', "percnt": '%',
	"num": '#', "commat": '@', "period": '.', "lowbar": '_', "excl": '!', "dollar": '$',
	"lpar": '(', "rpar": ')', "ast": '*', "comma": ',', "semi": ';', "bsol": '\\',
}

// escapedRune reads the HTML character reference or JSON escape at the start of s: the
// character it stands for and its length, or 0 when s starts with neither.
func escapedRune(s string) (rune, int) {
	switch {
	case len(s) >= 2 && s[0] == '\\':
		switch s[1] {
		case '/', '\\', '"':
			return rune(s[1]), 2
		case 'u':
			if len(s) >= 6 {
				if v, err := strconv.ParseUint(s[2:6], 16, 16); err == nil {
					return rune(v), 6
				}
			}
		}
	case len(s) >= 3 && s[0] == '&':
		end := strings.IndexByte(s[:min(len(s), maxEscaped)], ';')
		if end < 2 {
			return 0, 0
		}
		ref := s[1:end]
		if ref[0] != '#' {
			if r, ok := htmlNames[ref]; ok {
				return r, end + 1
			}
			return 0, 0
		}
		digits, base := ref[1:], 10
		if digits != "" && (digits[0] == 'x' || digits[0] == 'X') {
			digits, base = digits[1:], 16
		}
		if digits == "" || digits[0] == '+' || digits[0] == '-' {
			return 0, 0
		}
		if v, err := strconv.ParseUint(digits, base, 21); err == nil && utf8.ValidRune(rune(v)) {
			return rune(v), end + 1
		}
	}
	return 0, 0
}

// longest is the length of the longest of secrets.
func longest(secrets []string) int {
	n := 0
	for _, s := range secrets {
		n = max(n, len(s))
	}
	return n
}

// retryAfter reads a Retry-After header (RFC 9110: a number of seconds, or a date) as
// the wait from now it asks for; 0 for none, one already past or one it cannot read.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	const longest = 365 * 24 * time.Hour // beyond any max_backoff, and no overflow
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil: // more digits than an int64 holds
			return longest
		case secs <= 0:
			return 0
		}
		return min(time.Duration(secs), longest/time.Second) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// idempotencyKey is the Idempotency-Key a hand-off of source's key carries: distinct for
// each (source, key) and unchanged by transport. HTTP trims spaces and tabs around a
// header value and leaves bytes past ASCII to each server's reading, so "abc" and "abc "
// would reach the downstream as one key, and it would drop the second event as a repeat.
//
// A plain key (only visible ASCII and inner spaces) of a source whose name has no ':' is
// sent as "<source>:<key>", as it always was. Any other is sent as "!<source>:<key>",
// each part percent-encoded: every byte outside 0x21-0x7E, and '%', becomes %XX, and ':'
// does too in the key. The forms cannot meet, whatever an event id spells out:
//   - an encoded form starts with '!', a plain form with its source name, which is
//     never '!' (the configuration refuses it, and such a name would be encoded);
//   - in a plain form the first ':' ends the source, which has none;
//   - in an encoded form the last ':' ends the source, as the key's are encoded, and
//     percent-encoding with '%' itself encoded is undone one way only.
//
// A source name may hold ':' ("a:b"), which would make the plain forms of ("a", "b:c")
// and ("a:b", "c") one: such a source's keys are always encoded.
func idempotencyKey(source, key string) string {
	if plainKey(key) && plainKey(source) && source[0] != '!' && !strings.ContainsRune(source, ':') {
		return source + ":" + key
	}
	b := make([]byte, 0, 1+len(source)+1+len(key)+16)
	b = append(b, '!')
	b = appendPercent(b, source, false)
	b = append(b, ':')
	return string(appendPercent(b, key, true))
}

// plainKey reports whether s is sent as it is: not empty, only visible ASCII and
// spaces, and no space at either end, where HTTP would trim it.
func plainKey(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// appendPercent appends s with every byte outside 0x21-0x7E, '%', and ':' when colon is
// set, written as %XX.
func appendPercent(b []byte, s string, colon bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '%' || colon && c == ':' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

// setEnvelope gives an item's hand-off what its request said of all its events (Mews'
// enterprise, Adyen's live), which the item's body alone does not
// (storage.BatchEnvelopeHandOff).
func setEnvelope(h http.Header, envelope string) {
	if name, value := storage.BatchEnvelopeHandOff(envelope); name != "" {
		h.Set(name, value)
	}
}

// attemptError is the text of a hand-off's error as it is stored and shown to every
// viewer. A *url.Error quotes forward_url, whose query may hold the downstream's token
// (net/http hides only a password): it is named, not quoted. What it wraps may quote
// the downstream's answer ("malformed HTTP status code …"), which may quote the URL:
// secrets are masked there as in the answer's excerpt. It is kept to the status line's
// bound (statusText): a status line net/http refuses comes back quoted whole, up to the
// answer's header bound.
func attemptError(err error, secrets []string) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Op + " forward_url: " + statusText(ue.Err.Error(), secrets)
	}
	return statusText(err.Error(), secrets)
}

// reportStuck keeps the hookdedup_stuck_keys gauge current: for every configured
// source, and for every other source with stuck keys (one renamed or removed with
// events still owed downstream, which no dispatcher of this configuration sends), until
// it has none: monitoring alerts on the gauge, and such keys are stuck too.
func (d *Dispatcher) reportStuck(ctx context.Context) {
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	others := map[string]bool{} // unconfigured sources on the gauge
	// The gauge keeps its last values while the keys cannot be counted: monitoring
	// would take them for current, so the log says they are not.
	fails := outage.New(d.log, slog.LevelWarn, "counting stuck keys failed; hookdedup_stuck_keys keeps its last values",
		"stuck keys counted again")
	for {
		counts, err := d.cfg.Store.StuckCounts(ctx, d.cfg.Now().Add(-d.cfg.StuckAfter))
		if ctx.Err() == nil {
			fails.Note(time.Now(), err)
		}
		if err == nil {
			for name := range d.sources {
				d.cfg.Metrics.StuckKeys.WithLabelValues(name).Set(float64(counts[name]))
			}
			for name, n := range counts {
				if _, ok := d.sources[name]; !ok && n > 0 {
					d.cfg.Metrics.StuckKeys.WithLabelValues(name).Set(float64(n))
					others[name] = true
				}
			}
			for name := range others {
				if counts[name] == 0 {
					d.cfg.Metrics.StuckKeys.DeleteLabelValues(name)
					delete(others, name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
