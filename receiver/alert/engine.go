package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// Store is what the engine asks of storage; each storage engine satisfies it.
type Store interface {
	ActiveAlerts(ctx context.Context) ([]storage.Alert, error)
	// OpenAlert opens an alert with its notifications, or returns the active one.
	OpenAlert(ctx context.Context, a storage.Alert, at time.Time) (storage.Alert, bool, error)
	HoldAlert(ctx context.Context, id int64, summary, value string, at time.Time) error
	// ResolveAlert returns storage.ErrAlertState for an alert already resolved.
	ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error)
	// ClearAlert returns storage.ErrAlertHeld for an alert held within clearFor.
	ClearAlert(ctx context.Context, id int64, clearFor time.Duration, at time.Time) (storage.Alert, error)
	LeaseNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int, channels []string) ([]storage.Notification, error)
	GiveUpNotifications(ctx context.Context, channels []string, before time.Time) (int64, error)
	// FinishNotification returns storage.ErrLeaseLost when another sender leased n since.
	FinishNotification(ctx context.Context, n storage.Notification, res storage.NotificationResult, at time.Time) error

	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)
	MoneyMismatches(ctx context.Context, since time.Time) (map[string]int64, error)
	OpenSuspects(ctx context.Context) (map[string]int64, error)
	SignatureFailures(ctx context.Context, since time.Time, status int) (map[string]int64, error)
	FailingStreaks(ctx context.Context, sources []string, limit int) (map[string]int, error)
	Ping(ctx context.Context) error
}

// fileStore is a Store kept in a file of this machine: the disk_space rule watches the
// file system that holds it.
type fileStore interface {
	Path() string
}

// Config wires an Engine.
type Config struct {
	Store    Store
	Rules    []Rule     // checked (CheckRules), with their defaults
	Channels []*Channel // every channel a rule names
	// Sources are the names of the configured sources.
	Sources []string
	// StuckAfter: a key processing for longer is stuck. Default 10m.
	StuckAfter time.Duration
	// Interval is how often the rules are evaluated and due notifications sent.
	// Default 5s.
	Interval time.Duration
	// Now is the clock; default time.Now. Tests move it.
	Now func() time.Time
	// Ready says whether the database can commit a write; default Store.Ping.
	Ready func(ctx context.Context) error
	// DiskFree returns the bytes free to this process on the database's file system;
	// default statfs of the database file's directory, for a Store kept in a file (one
	// with a Path method); for any other, disk_space reports that it has nothing to watch.
	DiskFree func() (uint64, error)
	// ClockSkew returns the median skew of signed timestamps of the last hour and how
	// many there were (the receiver's ClockSkew); nil: clock_skew never fires.
	ClockSkew func() (time.Duration, int)
	// Machine names the machine this engine runs on (its host name). A clock_skew
	// alert is of one machine's clock: it is opened with the machine as its subject and
	// resolved only on that machine, since replicas on other machines, whose clocks
	// may be right, see nothing of it.
	Machine string
	// ConsoleURL, if set, is the console's address; messages link to its alerts page.
	ConsoleURL string
	Logger     *slog.Logger
	// Notified, if set, is told the result of each attempt to send a notification on a
	// channel: NotifiedSent, NotifiedRetry or NotifiedFailed (given up). A channel that
	// keeps failing is then seen where the other series are watched, not only in the
	// log and on the Alerts page.
	Notified func(channel, result string)
}

// The results Config.Notified is told.
const (
	NotifiedSent   = "sent"
	NotifiedRetry  = "retry"
	NotifiedFailed = "failed"
)

// Engine evaluates the rules, opens and resolves alerts, and sends their notifications.
type Engine struct {
	cfg      Config
	channels map[string]*Channel
	log      *slog.Logger
	wake     chan struct{}

	mu sync.Mutex
	// since holds when each condition that holds was first seen holding, by rule and
	// subject, its alert opened or not: forgotten only once an evaluation finds it
	// clear, so that an alert resolved by hand while its condition still holds opens
	// again at the next evaluation, not after another For.
	since map[condKey]time.Time
	// clear holds when the condition of each active alert (stored or direct) was first
	// seen clear, by rule and subject: it resolves once clear for its rule's ClearFor.
	// Kept in memory only: after a restart the hold starts again at the first
	// evaluation, which delays a resolution by at most ClearFor and never sends one
	// early.
	clear map[condKey]time.Time
	// direct holds the conditions whose opening could not be stored (the database not
	// ready): their notifications are sent straight away, not through the outbox.
	direct map[condKey]*directAlert
	// directSends are the messages being sent straight away: apart from the
	// evaluations, which they would hold up for every try of a channel that hangs.
	// Run waits for them before it returns.
	directSends sync.WaitGroup
	// gaveUpAt is when lease last gave up the notifications of channels no replica has.
	gaveUpAt time.Time
}

type condKey struct{ rule, subject string }

// directAlert is an alert whose opening was sent straight away (sendDirect).
type directAlert struct {
	alert storage.Alert
	// told is closed once the opening's send has ended (sent or given up): the
	// resolution waits for it, so that no channel hears of the end before the start.
	told chan struct{}
	// toldTo names the channels that took the opening, set before told is closed:
	// stored, the alert queues the opening for the others (storage.Alert.OpenedTold).
	toldTo []string
}

// New returns an Engine for cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("alert engine: Store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Notified == nil {
		cfg.Notified = func(string, string) {}
	}
	if cfg.Ready == nil {
		cfg.Ready = cfg.Store.Ping
	}
	if cfg.DiskFree == nil {
		if f, ok := cfg.Store.(fileStore); ok {
			dir := filepath.Dir(f.Path())
			cfg.DiskFree = func() (uint64, error) { return StatfsFree(dir) }
		} else {
			cfg.DiskFree = func() (uint64, error) {
				return 0, errors.New("the database is no file of this machine: disk_space has nothing to watch")
			}
		}
	}
	e := &Engine{cfg: cfg, channels: map[string]*Channel{}, log: cfg.Logger.With("component", "alerts"),
		wake: make(chan struct{}, 1), since: map[condKey]time.Time{}, clear: map[condKey]time.Time{}, direct: map[condKey]*directAlert{}}
	for _, c := range cfg.Channels {
		e.channels[c.Name()] = c
	}
	for i, r := range cfg.Rules {
		cfg.Rules[i] = r.WithDefaults()
		for _, c := range r.Channels {
			if e.channels[c] == nil {
				return nil, fmt.Errorf("alert %q: channel %q is not configured", r.Name, c)
			}
		}
	}
	return e, nil
}

// StatfsFree returns the bytes free to an unprivileged user on the file system of dir.
func StatfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Wake asks the running engine to send due notifications now (after an alert was
// resolved by hand). It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run evaluates the rules every Interval, and sends due notifications, until ctx ends.
// With neither rules nor channels it makes one pass, which resolves the alerts of rules
// no longer configured, and returns. Notifications are sent apart from the evaluations
// (sendLoop): a channel that hangs until its timeout holds up neither the rules nor
// the other channels; so are the messages sent straight away (a database_not_ready
// alert that cannot be stored), which Run waits for before it returns.
func (e *Engine) Run(ctx context.Context) {
	defer func() {
		// Last, once every send has ended: an alert told straight away is kept in
		// memory until the database takes it, and a restart would forget it, its
		// channels never told that it resolved.
		e.directSends.Wait()
		e.storeDirectAtStop(ctx)
	}()
	if len(e.cfg.Rules) == 0 && len(e.channels) == 0 {
		if err := e.Evaluate(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("evaluating alert rules", "err", err)
		}
		// Again while any were due: a notification waits for the one before it to the
		// same channel (an alert's resolved for its opened given up just now).
		for range 10 {
			due, _, err := e.sendDue(ctx)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("sending alert notifications", "err", err)
			}
			if err != nil || due == 0 {
				break
			}
		}
		return
	}
	sendWake := make(chan struct{}, 1)
	poke := func() {
		select {
		case sendWake <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { e.sendLoop(ctx, sendWake, poke) })
	t := time.NewTicker(e.cfg.Interval)
	defer t.Stop()
	// While the database cannot store or be reached, every evaluation fails alike;
	// database_not_ready, if configured, tells the channels.
	fails := outage.New(e.log, slog.LevelWarn, "evaluating alert rules", "alert rules evaluated again")
	for {
		if err := e.Evaluate(ctx); ctx.Err() == nil {
			fails.Note(time.Now(), err)
		}
		poke() // what the evaluation opened or resolved is due at once
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.wake:
		}
	}
}

// sendLoop leases the notifications due every Interval, when woken, and whenever a
// send ends (the next notification of that alert to that channel may be due then), and
// sends each in a goroutine of its own, until ctx ends; then it waits for the sends
// under way. A leased notification is due again only once its lease has run out, so
// a send that hangs is not started twice.
func (e *Engine) sendLoop(ctx context.Context, wake <-chan struct{}, poke func()) {
	t := time.NewTicker(e.cfg.Interval)
	defer t.Stop()
	var sends sync.WaitGroup
	defer sends.Wait()
	fails := outage.New(e.log, slog.LevelWarn, "leasing alert notifications", "alert notifications leased again")
	for {
		due, err := e.lease(ctx, e.cfg.Now())
		if ctx.Err() == nil {
			fails.Note(time.Now(), err)
		}
		for _, n := range due {
			sends.Go(func() {
				if _, err := e.send(ctx, n); err != nil && ctx.Err() == nil {
					e.log.Warn("sending alert notifications", "err", err)
				}
				poke()
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// ownCondition reports whether this engine judges the condition of rule r on subject:
// every rule's but another machine's clock (clock_skew), which only that machine sees.
// An alert opened with no machine (by an earlier version) is anyone's.
func (e *Engine) ownCondition(r Rule, subject string) bool {
	return r.Kind != KindClockSkew || subject == "" || subject == e.cfg.Machine
}

// finding is what a rule found on one subject: a condition that holds.
type finding struct {
	subject, summary, value string
}

// Evaluate evaluates every rule once: it opens an alert for each condition that holds
// (once it has held for the rule's For) and has none active, records the latest value
// of those that have one, and resolves the active alerts whose condition has stayed
// clear for the rule's ClearFor. The opening and the resolution each queue one
// notification per channel: a condition that holds over many evaluations sends
// nothing more, and one that flaps keeps its alert open until it stays clear. The
// active alerts of a rule no longer configured are resolved, as such, once no replica
// has held them for DefaultClearFor (at once when no alerting is configured). A rule
// that cannot be evaluated (a query failed) leaves its alerts as they are; its error
// is returned with the others' after every rule had its turn. The messages of an
// alert that cannot be stored are sent straight away, in the background: Evaluate
// does not wait for them (Run does).
func (e *Engine) Evaluate(ctx context.Context) error {
	now := e.cfg.Now()
	active, err := e.cfg.Store.ActiveAlerts(ctx)
	if err != nil {
		// The database may be what is wrong: the rule that watches it still runs.
		active = nil
		if rerr := e.evaluateUnstored(ctx, now); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	byKey := map[condKey]storage.Alert{}
	for _, a := range active {
		byKey[condKey{a.Rule, a.Subject}] = a
	}
	var errs []error
	if err := e.storeDirect(ctx, byKey); err != nil {
		errs = append(errs, err)
	}
	for _, r := range e.cfg.Rules {
		found, err := e.evaluate(ctx, r, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("alert %q: %w", r.Name, err))
			continue
		}
		holding := map[string]bool{}
		for _, f := range found {
			holding[f.subject] = true
			if err := e.hold(ctx, r, f, byKey, now); err != nil {
				errs = append(errs, fmt.Errorf("alert %q: %w", r.Name, err))
			}
		}
		e.mu.Lock()
		for k := range e.since {
			if k.rule == r.Name && !holding[k.subject] {
				delete(e.since, k)
			}
		}
		e.mu.Unlock()
		for k, a := range byKey {
			if k.rule != r.Name || holding[k.subject] || !e.ownCondition(r, k.subject) || !e.clearedFor(k, r.ClearFor, now) ||
				a.HeldWithin(r.ClearFor, now) { // another replica saw it hold
				continue
			}
			_, err := e.cfg.Store.ClearAlert(ctx, a.ID, r.ClearFor, now)
			if errors.Is(err, storage.ErrAlertHeld) {
				continue // held by another replica since ActiveAlerts read it
			}
			if err != nil && !errors.Is(err, storage.ErrAlertState) {
				errs = append(errs, fmt.Errorf("alert %q: %w", r.Name, err))
				continue
			}
			e.mu.Lock()
			delete(e.clear, k)
			e.mu.Unlock()
			e.log.Info("alert resolved", "rule", r.Name, "subject", k.subject, "alert", a.ID)
		}
		e.resolveDirect(ctx, r, holding, now)
	}
	// Forget the holds of alerts no longer active (resolved by hand, or above).
	e.mu.Lock()
	for k := range e.clear {
		_, stored := byKey[k]
		_, direct := e.direct[k]
		if !stored && !direct {
			delete(e.clear, k)
		}
	}
	e.mu.Unlock()
	// An alert of a rule no longer configured (removed or renamed) has no condition
	// left to clear: left active it would stay open for good. It is resolved once no
	// replica has seen its condition hold for DefaultClearFor: during a rolling restart
	// that renames a rule, a replica still on the old configuration holds it, and
	// resolving it at once would have each replica resolve the other's alert and the
	// other open it again, over and over.
	for k, a := range byKey {
		if slices.ContainsFunc(e.cfg.Rules, func(r Rule) bool { return r.Name == k.rule }) {
			continue
		}
		// With no alerting configured at all, this evaluation is the last (Run makes one
		// pass): nothing would resolve it later.
		if a.HeldWithin(DefaultClearFor, now) && (len(e.cfg.Rules) > 0 || len(e.channels) > 0) {
			continue
		}
		if _, err := e.cfg.Store.ResolveAlert(ctx, a.ID, storage.ResolvedRuleRemoved, now); err != nil && !errors.Is(err, storage.ErrAlertState) {
			errs = append(errs, fmt.Errorf("alert %q: %w", k.rule, err))
			continue
		}
		e.log.Info("alert resolved: its rule is no longer configured", "rule", k.rule, "subject", k.subject, "alert", a.ID)
	}
	return errors.Join(errs...)
}

// hold handles one condition that holds.
func (e *Engine) hold(ctx context.Context, r Rule, f finding, active map[condKey]storage.Alert, now time.Time) error {
	k := condKey{r.Name, f.subject}
	e.mu.Lock()
	delete(e.clear, k) // held again within the hold: the same alert goes on
	first, seen := e.since[k]
	if !seen || first.After(now) { // or seen before the clock was set back
		first = now
		e.since[k] = now
	}
	_, sentDirect := e.direct[k]
	e.mu.Unlock()
	if a, ok := active[k]; ok {
		// Written at every evaluation that finds it holding, on every replica: another
		// replica, whose evaluations come at other moments, may see it clear meanwhile,
		// and must not resolve it while any replica sees it hold (ClearAlert).
		err := e.cfg.Store.HoldAlert(ctx, a.ID, f.summary, f.value, now)
		if err != nil && r.Kind == KindDatabaseNotReady {
			// The write fails for the very reason the alert is open: an error every
			// evaluation would say nothing new. It resolves only once writes pass.
			return nil
		}
		return err
	}
	if now.Sub(first) < r.For {
		return nil
	}
	if sentDirect {
		return nil // told straight away: storeDirect stores it once the database takes it
	}
	a := storage.Alert{Rule: r.Name, Kind: r.Kind, Subject: f.subject, Summary: f.summary, Value: f.value, Channels: r.Channels}
	stored, opened, err := e.cfg.Store.OpenAlert(ctx, a, now)
	if err != nil {
		if r.Kind == KindDatabaseNotReady {
			// The alert cannot be stored, nor its notifications queued: tell the
			// channels straight away, once, apart from the evaluation, which a
			// channel that hangs would hold up for three tries of its timeout.
			a.OpenedAt, a.State = now, storage.AlertOpen
			d := &directAlert{alert: a, told: make(chan struct{})}
			e.mu.Lock()
			e.direct[k] = d
			e.mu.Unlock()
			e.directSends.Go(func() {
				defer close(d.told)
				d.toldTo = e.sendDirect(ctx, a, storage.AlertOpened, now)
			})
		}
		return err
	}
	if opened {
		e.log.Warn("alert opened", "rule", r.Name, "subject", f.subject, "alert", stored.ID, "summary", f.summary)
	}
	return nil
}

// storeDirect stores each alert told straight away whose opening's send has ended, as
// soon as the database takes it, whether its condition still holds or not: stored,
// it is active (added to active) and resolves through the outbox, and a restart
// knows of it. Stored as opened at the moment it was told, it is not told again to the
// channels that took the opening; the others (a send a stop cut short, or given up)
// get it through the outbox. One the database does not take yet stays in memory,
// tried again at the next evaluation and resolved straight away if it clears before.
func (e *Engine) storeDirect(ctx context.Context, active map[condKey]storage.Alert) error {
	e.mu.Lock()
	var told []*directAlert
	for _, d := range e.direct {
		select {
		case <-d.told:
			told = append(told, d)
		default: // still being sent: its resolution would not wait for it
		}
	}
	e.mu.Unlock()
	var errs []error
	for _, d := range told {
		a := d.alert
		a.OpenedTold = d.toldTo
		stored, _, err := e.cfg.Store.OpenAlert(ctx, a, a.OpenedAt)
		if err != nil {
			errs = append(errs, fmt.Errorf("alert %q: %w", a.Rule, err))
			continue
		}
		k := condKey{a.Rule, a.Subject}
		e.mu.Lock()
		delete(e.direct, k)
		e.mu.Unlock()
		if active != nil {
			active[k] = stored
		}
		e.log.Info("alert told straight away is stored", "rule", a.Rule, "subject", a.Subject, "alert", stored.ID)
	}
	return errors.Join(errs...)
}

// storeDirectAtStop makes one last try, as serve stops, at storing the alerts told
// straight away: the usual remedy for a full disk is to free space and restart, and
// the next start must know to tell their resolution.
func (e *Engine) storeDirectAtStop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.storeDirect(ctx, nil); err != nil {
		e.log.Warn("alert told straight away not stored at the stop: the next start tells its opening again if its condition holds, "+
			"and never its resolution otherwise", "err", err)
	}
}

// evaluateUnstored runs the database_not_ready rules when the active alerts could not
// be read: the database may not answer at all.
func (e *Engine) evaluateUnstored(ctx context.Context, now time.Time) error {
	var errs []error
	for _, r := range e.cfg.Rules {
		if r.Kind != KindDatabaseNotReady {
			continue
		}
		found, err := e.evaluate(ctx, r, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range found {
			if err := e.hold(ctx, r, f, nil, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// resolveDirect tells the channels of the conditions notified straight away that they
// cleared.
func (e *Engine) resolveDirect(ctx context.Context, r Rule, holding map[string]bool, now time.Time) {
	for k, d := range e.directOf(r.Name) {
		if holding[k.subject] || !e.clearedFor(k, r.ClearFor, now) {
			continue
		}
		e.mu.Lock()
		delete(e.direct, k)
		delete(e.clear, k)
		e.mu.Unlock()
		e.directSends.Go(func() {
			<-d.told // the opening first, however long its tries take
			e.sendDirect(ctx, d.alert, storage.AlertResolvedEvent, now)
		})
	}
}

// directOf returns the conditions of rule notified straight away.
func (e *Engine) directOf(rule string) map[condKey]*directAlert {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[condKey]*directAlert{}
	for k, a := range e.direct {
		if k.rule == rule {
			out[k] = a
		}
	}
	return out
}

// clearedFor reports whether the condition k, clear now, has been seen clear for hold:
// the first evaluation to see it clear starts the hold.
func (e *Engine) clearedFor(k condKey, hold time.Duration, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	first, seen := e.clear[k]
	if !seen || first.After(now) { // or seen before the clock was set back
		first = now
		e.clear[k] = now
	}
	return now.Sub(first) >= hold
}

// sendDirect sends one message to each of the alert's channels, bypassing the outbox,
// each with a few quick retries.
func (e *Engine) sendDirect(ctx context.Context, a storage.Alert, event string, now time.Time) (took []string) {
	// The channels at once, each with its own retries: one that hangs holds up only
	// itself.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, name := range a.Channels {
		c := e.channels[name]
		if c == nil {
			continue
		}
		wg.Go(func() {
			if e.sendDirectTo(ctx, c, name, a, event, now) {
				mu.Lock()
				took = append(took, name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return took
}

// sentDespite is err, or nil when err only says that the channel took the message for
// some of its recipients (PartlySent), logged: sent again, it would reach the others
// twice.
func (e *Engine) sentDespite(err error, channel, rule string) error {
	var partly *PartlySent
	if errors.As(err, &partly) {
		e.log.Warn("alert notification sent, but not to every recipient", "channel", channel, "rule", rule, "err", partly.Err)
		return nil
	}
	return err
}

// sendDirectTo sends one message of sendDirect to channel c (named name), and reports
// whether c took it: false when its tries failed or a stop cut them short.
func (e *Engine) sendDirectTo(ctx context.Context, c *Channel, name string, a storage.Alert, event string, now time.Time) bool {
	m := Message{ID: fmt.Sprintf("alert_direct_%s_%d_%s", event, a.OpenedAt.UnixMilli(), name), Event: event, At: now,
		Summary: a.Summary, Value: a.Value, Alert: a, ConsoleURL: e.alertsURL()}
	var err error
	for try := range 3 {
		if err = e.sentDespite(c.Send(ctx, m), name, a.Rule); err == nil {
			break
		}
		if try < 2 {
			if ctx.Err() == nil {
				// Counted as the outbox counts a refused attempt it tries again: the
				// metric shows a failing channel however the notification goes.
				e.cfg.Notified(name, NotifiedRetry)
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Duration(try+1) * time.Second):
			}
		}
	}
	if err != nil {
		e.log.Warn("alert notification not sent", "channel", name, "rule", a.Rule, "event", event, "err", err)
		if ctx.Err() == nil {
			// A try a stop cut short is no give-up: the outbox tells the channel once
			// the database takes the alert, and does not count a cut attempt either.
			e.cfg.Notified(name, NotifiedFailed)
		}
		return false
	}
	e.cfg.Notified(name, NotifiedSent)
	return true
}

func (e *Engine) alertsURL() string {
	if e.cfg.ConsoleURL == "" {
		return ""
	}
	return e.cfg.ConsoleURL + "/alerts"
}

// evaluate returns the conditions of r that hold now.
func (e *Engine) evaluate(ctx context.Context, r Rule, now time.Time) ([]finding, error) {
	s := e.cfg.Store
	var counts map[string]int64
	var what string
	switch r.Kind {
	case KindStuckKeys:
		stuck, err := s.StuckCounts(ctx, now.Add(-e.cfg.StuckAfter))
		if err != nil {
			return nil, err
		}
		counts = map[string]int64{}
		for src, n := range stuck {
			counts[src] = int64(n)
		}
		what = "stuck keys"
	case KindMoneyMismatch:
		var err error
		if counts, err = s.MoneyMismatches(ctx, now.Add(-r.Window)); err != nil {
			return nil, err
		}
		what = fmt.Sprintf("duplicates with a different amount, currency or status in the last %s", r.Window)
	case KindSuspectedDouble:
		var err error
		if counts, err = s.OpenSuspects(ctx); err != nil {
			return nil, err
		}
		what = "suspected doubles waiting for a review"
	case KindSignatureFailures:
		var err error
		if counts, err = s.SignatureFailures(ctx, now.Add(-r.Window), 401); err != nil {
			return nil, err
		}
		what = fmt.Sprintf("deliveries refused for their signature in the last %s", r.Window)
	case KindDownstreamFailing:
		sources := e.cfg.Sources
		if r.Source != "" {
			sources = []string{r.Source}
		}
		streaks, err := s.FailingStreaks(ctx, sources, r.Times)
		if err != nil {
			return nil, err
		}
		var out []finding
		for _, src := range sources {
			if n := streaks[src]; n >= r.Times {
				out = append(out, finding{subject: src, value: strconv.Itoa(n),
					summary: fmt.Sprintf("The last %d attempts to hand %s's events downstream failed.", n, src)})
			}
		}
		return out, nil
	case KindDatabaseNotReady:
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.cfg.Ready(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			return nil, nil
		}
		return []finding{{value: "not ready", summary: "The database cannot commit a write: " + err.Error()}}, nil
	case KindDiskSpace:
		free, err := e.cfg.DiskFree()
		if err != nil {
			return nil, err
		}
		if free >= r.MinFree {
			return nil, nil
		}
		return []finding{{value: strconv.FormatUint(free, 10),
			summary: fmt.Sprintf("%s free on the database's file system, under %s.", FormatBytes(free), FormatBytes(r.MinFree))}}, nil
	case KindClockSkew:
		if e.cfg.ClockSkew == nil {
			return nil, nil
		}
		median, n := e.cfg.ClockSkew()
		if n == 0 || (median <= r.MaxSkew && median >= -r.MaxSkew) {
			return nil, nil
		}
		way := "ahead of"
		if median < 0 {
			way = "behind"
		}
		return []finding{{subject: e.cfg.Machine, value: median.Round(time.Second).String(),
			summary: fmt.Sprintf("Senders' signed timestamps are %s %s this machine's clock (median of %d deliveries in the last hour): check this machine's time (NTP).",
				median.Abs().Round(time.Second), way, n)}}, nil
	default:
		return nil, fmt.Errorf("unknown kind %q", r.Kind)
	}
	var out []finding
	for src, n := range counts {
		if r.Source != "" && src != r.Source || n <= r.Threshold {
			continue
		}
		out = append(out, finding{subject: src, value: strconv.FormatInt(n, 10),
			summary: fmt.Sprintf("%d %s on %s (more than %d).", n, what, src, r.Threshold)})
	}
	return out, nil
}

// notificationLease is how long a notification being sent is kept from other senders:
// longer than any channel's timeout (NewChannel refuses one of MaxChannelTimeout or
// more), so that a slow send is not sent again by another replica meanwhile.
const notificationLease = MaxChannelTimeout + time.Minute

// unknownChannelGrace is how long a notification due to a channel that no running
// replica's configuration has waits before it is given up as no longer configured:
// longer than a rolling restart that adds the channel takes.
const unknownChannelGrace = 10 * time.Minute

// lease leases the notifications due at now to this engine's channels, after giving up
// those that no replica has tried for unknownChannelGrace. With no alerting configured
// at all (Run's one pass), it leases every notification, to give each up at once
// (send). Rules without a channel are not that: during a rolling restart that adds the
// first channel, the replicas still on the old configuration leave its notifications
// to the new ones, as they would another channel's.
func (e *Engine) lease(ctx context.Context, now time.Time) ([]storage.Notification, error) {
	if len(e.channels) == 0 && len(e.cfg.Rules) == 0 {
		return e.cfg.Store.LeaseNotifications(ctx, now, notificationLease, 50, nil) // nil: any channel
	}
	names := slices.Sorted(maps.Keys(e.channels))
	if names == nil {
		names = []string{} // no channel, not nil: any
	}
	// Once a minute at most: the grace is minutes, and on PostgreSQL each look is a
	// write transaction of every replica.
	e.mu.Lock()
	giveUp := now.Sub(e.gaveUpAt) >= time.Minute
	if giveUp {
		e.gaveUpAt = now
	}
	e.mu.Unlock()
	if giveUp {
		n, err := e.cfg.Store.GiveUpNotifications(ctx, names, now.Add(-unknownChannelGrace))
		if err != nil {
			return nil, err
		}
		if n > 0 {
			e.log.Warn("alert notifications given up: their channel is in no replica's configuration", "notifications", n)
		}
	}
	return e.cfg.Store.LeaseNotifications(ctx, now, notificationLease, 50, names)
}

// SendDue sends the notifications that are due, each to its channel, and records how
// each went: sent; retried later with backoff; or, after the channel's last attempt,
// given up (logged). Returns how many were sent.
func (e *Engine) SendDue(ctx context.Context) (int, error) {
	_, sent, err := e.sendDue(ctx)
	return sent, err
}

// sendDue is SendDue, saying as well how many notifications were due.
func (e *Engine) sendDue(ctx context.Context) (due, sent int, err error) {
	now := e.cfg.Now()
	leased, err := e.lease(ctx, now)
	if err != nil {
		return 0, 0, err
	}
	sent, err = e.sendAll(ctx, leased)
	return len(leased), sent, err
}

// sendAll sends due, each in a goroutine of its own, and waits for them all.
func (e *Engine) sendAll(ctx context.Context, due []storage.Notification) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sent int
		errs []error
	)
	for _, n := range due {
		wg.Go(func() {
			ok, err := e.send(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				sent++
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return sent, errors.Join(errs...)
}

// send sends one notification and records the outcome; the error is one of recording.
func (e *Engine) send(ctx context.Context, n storage.Notification) (bool, error) {
	c := e.channels[n.Channel]
	var res storage.NotificationResult
	if c == nil {
		res = storage.NotificationResult{Failed: true, Error: "channel " + n.Channel + " is no longer configured"}
	} else {
		// The id names the notification, the same on every attempt, and no other: with
		// the time it was written, two installations (or a database restored beside
		// its copy) that number their notifications alike still tell theirs apart.
		m := Message{ID: "alert_notification_" + strconv.FormatInt(n.ID, 10) + "_" + strconv.FormatInt(n.At.UnixMilli(), 10),
			Event: n.Event, Actor: n.Actor, At: n.At,
			Summary: n.Summary, Value: n.Value, Alert: n.Alert, ConsoleURL: e.alertsURL()}
		err := c.Send(ctx, m)
		switch {
		case e.sentDespite(err, n.Channel, n.Alert.Rule) == nil:
			// Sent, to every recipient or to some (PartlySent), stop or not: sent
			// again, it would reach them twice.
			res.Sent = true
		case ctx.Err() != nil:
			// serve is stopping: the attempt was cut short, not refused. It is handed
			// back (due at once, as the stop left it, no attempt counted) so that the
			// next start sends it without waiting for the lease to run out.
			res = storage.NotificationResult{Returned: true, NextAt: e.cfg.Now()}
		case n.Attempts+1 >= c.maxAttempts:
			res = storage.NotificationResult{Failed: true, Error: err.Error()}
		default:
			res = storage.NotificationResult{Error: err.Error(), NextAt: e.cfg.Now().Add(backoff(n.Attempts+1, time.Second, c.maxBackoff))}
		}
	}
	attrs := []any{"channel", n.Channel, "rule", n.Alert.Rule, "subject", n.Alert.Subject, "event", n.Event, "attempt", n.Attempts + 1}
	switch {
	case res.Sent:
		e.log.Info("alert notification sent", attrs...)
		e.cfg.Notified(n.Channel, NotifiedSent)
	case res.Returned:
		e.log.Info("alert notification left for the next start: serve is stopping", attrs...)
	case res.Failed:
		e.log.Error("alert notification given up", append(attrs, "err", res.Error)...)
		e.cfg.Notified(n.Channel, NotifiedFailed)
	default:
		e.log.Warn("alert notification failed; will retry", append(attrs, "err", res.Error, "next", res.NextAt)...)
		e.cfg.Notified(n.Channel, NotifiedRetry)
	}
	finish, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.FinishNotification(finish, n, res, e.cfg.Now()); err != nil {
		if errors.Is(err, storage.ErrLeaseLost) {
			// This attempt outlasted its lease (a machine paused, a process stopped):
			// another sender has the notification now, and its outcome stands.
			e.log.Warn("alert notification's outcome not recorded: its lease ran out, and another sender has it or it was deleted",
				append(attrs, "sent", res.Sent)...)
			return res.Sent, nil
		}
		return res.Sent, err
	}
	return res.Sent, nil
}

// backoff is the wait before attempt n+1: first, doubled at each attempt, at most max,
// with ±20 % jitter so that notifications failed together are not retried together.
func backoff(n int, first, max time.Duration) time.Duration {
	b := first
	for i := 1; i < n && b < max; i++ {
		b *= 2
	}
	b = min(b, max)
	return time.Duration(float64(b) * (0.8 + 0.4*rand.Float64()))
}
