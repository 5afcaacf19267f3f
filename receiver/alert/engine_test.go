package alert_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// wantEvents checks the events the webhook receiver got, in order, as "type rule subject".
func wantEvents(t *testing.T, h *hook, want ...string) {
	t.Helper()
	h.check(t)
	var got []string
	for _, p := range h.payloads() {
		got = append(got, strings.TrimSpace(p.Type+" "+p.Data.Rule+" "+p.Data.Subject))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("webhook got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func recordDispatched(t *testing.T, db *sqlite.DB, source, key string) *storage.Delivery {
	t.Helper()
	return storagetest.Record(t, db, &storage.Delivery{Source: source, Key: key, KeyMethod: "event_id", PayloadHash: "h-" + key,
		Status: 200, ContentType: "application/json", Body: []byte(`{"id":"` + key + `"}`)},
		storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
}

// TestEngine_StuckKeys fires once more than Threshold keys have been stuck for the
// rule's For, sends one notification however many evaluations the condition holds for,
// and resolves by itself when a release brings the count down.
func TestEngine_StuckKeys(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "stuck", Kind: alert.KindStuckKeys, Threshold: 1, For: 5 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")})
	recordDispatched(t, f.db, "ota", "k1")
	recordDispatched(t, f.db, "ota", "k2")
	f.evaluate(t, e)
	if n := len(f.alerts(t)); n != 0 {
		t.Fatalf("%d alerts while nothing is stuck", n)
	}
	f.clock.Add(11 * time.Minute) // past stuck_after: two stuck keys
	f.evaluate(t, e)
	f.clock.Add(4 * time.Minute)
	f.evaluate(t, e)
	if n := len(f.alerts(t)); n != 0 {
		t.Fatalf("%d alerts before the condition held for 5m", n)
	}
	for range 5 { // held for 5m and more, over several evaluations
		f.clock.Add(time.Minute)
		f.evaluate(t, e)
	}
	as := f.alerts(t)
	if len(as) != 1 || as[0].State != storage.AlertOpen || as[0].Subject != "ota" || as[0].Value != "2" {
		t.Fatalf("alerts = %+v, want one open on ota with value 2", as)
	}
	wantEvents(t, h, "alert.opened stuck ota")

	if _, err := f.db.ReleaseKey(context.Background(), storage.Release{Source: "ota", Key: "k1", Actor: "sam", Reason: "test",
		StuckBefore: f.clock.Now().Add(-10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	f.settle(t, e)
	as = f.alerts(t)
	if as[0].State != storage.AlertResolved || as[0].ResolvedBy != "" || !as[0].ResolvedAt.Equal(f.clock.Now()) {
		t.Fatalf("alert = %+v, want resolved by itself now", as[0])
	}
	wantEvents(t, h, "alert.opened stuck ota", "alert.resolved stuck ota")
}

// TestEngine_MoneyMismatch fires on a duplicate that moved money within the window and
// resolves once the window has passed it.
func TestEngine_MoneyMismatch(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "money", Kind: alert.KindMoneyMismatch, Window: time.Hour, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")})
	d := storagetest.Record(t, f.db, &storage.Delivery{Source: "cm", Key: "k", PayloadHash: "a", Status: 200}, storage.ClaimOptions{TTL: time.Hour})
	f.evaluate(t, e)
	wantEvents(t, h)
	execSQL(t, f.db, `UPDATE deliveries SET money_mismatch = 1 WHERE id = ?`, d.ID)
	f.evaluate(t, e)
	wantEvents(t, h, "alert.opened money cm")
	f.clock.Add(61 * time.Minute)
	f.settle(t, e)
	wantEvents(t, h, "alert.opened money cm", "alert.resolved money cm")
}

// TestEngine_SuspectedDouble fires on an open suspect and resolves once it is reviewed.
func TestEngine_SuspectedDouble(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "doubles", Kind: alert.KindSuspectedDouble, Source: "ota", Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")})
	execSQL(t, f.db, `INSERT INTO suspects (kind, delivery, source, flagged_at) VALUES ('business_key', 1, 'ota', ?)`, t0.UnixMilli())
	execSQL(t, f.db, `INSERT INTO suspects (kind, delivery, source, flagged_at) VALUES ('business_key', 2, 'cm', ?)`, t0.UnixMilli())
	f.evaluate(t, e)
	wantEvents(t, h, "alert.opened doubles ota") // the rule watches ota only
	execSQL(t, f.db, `UPDATE suspects SET state = 'dismissed' WHERE source = 'ota'`)
	f.settle(t, e)
	wantEvents(t, h, "alert.opened doubles ota", "alert.resolved doubles ota")
}

// TestEngine_SignatureFailures counts stored and only-counted 401s of a source within
// the window.
func TestEngine_SignatureFailures(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "sigs", Kind: alert.KindSignatureFailures, Threshold: 2, Window: 5 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")})
	for range 2 {
		storagetest.Record(t, f.db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature does not match"}, storage.ClaimOptions{})
	}
	storagetest.Record(t, f.db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400, Error: "not JSON"}, storage.ClaimOptions{})
	f.evaluate(t, e)
	wantEvents(t, h) // two 401s: not above 2
	if err := f.db.AddRejectionCounts(context.Background(), []storage.RejectionCount{{Source: "ota", Status: 401, Minute: t0, Rejections: 1}}); err != nil {
		t.Fatal(err)
	}
	f.evaluate(t, e)
	wantEvents(t, h, "alert.opened sigs ota")
	if v := f.alerts(t)[0].Value; v != "3" {
		t.Errorf("value = %q, want 3", v)
	}
	f.clock.Add(10 * time.Minute)
	f.settle(t, e)
	wantEvents(t, h, "alert.opened sigs ota", "alert.resolved sigs ota")
}

// TestEngine_DatabaseNotReady fires while the readiness check fails.
func TestEngine_DatabaseNotReady(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var mu sync.Mutex
	var ready error
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
		})
	f.evaluate(t, e)
	mu.Lock()
	ready = errors.New("ping database: 1000 bytes free on its file system, under 1048576")
	mu.Unlock()
	f.evaluate(t, e)
	f.evaluate(t, e)
	mu.Lock()
	ready = nil
	mu.Unlock()
	f.settle(t, e)
	wantEvents(t, h, "alert.opened db", "alert.resolved db")
	if p := h.payloads()[0]; !strings.Contains(p.Data.Summary, "1000 bytes free") {
		t.Errorf("summary %q does not say why", p.Data.Summary)
	}
}

// TestEngine_DatabaseGone: when the database cannot store the alert at all (its file
// left its path), the channels are told straight away, once.
func TestEngine_DatabaseGone(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) { c.Ready = nil }) // the real Ping
	f.evaluate(t, e)
	wantEvents(t, h)
	if err := renameAside(f.db.Path()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		err := e.Evaluate(context.Background())
		e.WaitDirect() // the opening told: the next evaluation tries to store it
		if err == nil {
			t.Fatal("Evaluate stored an alert in a database whose file is gone")
		}
	}
	wantEvents(t, h, "alert.opened db")
}

// TestEngine_DiskSpace reads the free space of the database's file system with statfs.
func TestEngine_DiskSpace(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	rule := func(min uint64) []alert.Rule {
		return []alert.Rule{{Name: "disk", Kind: alert.KindDiskSpace, MinFree: min, Channels: []string{"ops"}}}
	}
	real := func(c *alert.Config) { c.DiskFree = nil }
	f.evaluate(t, f.engine(t, rule(1<<62), []*alert.Channel{h.channel(t, "ops")}, real)) // more than any disk has
	wantEvents(t, h, "alert.opened disk")
	f.settle(t, f.engine(t, rule(1), []*alert.Channel{h.channel(t, "ops")}, real)) // one byte free is enough
	wantEvents(t, h, "alert.opened disk", "alert.resolved disk")
}

// TestEngine_ClockSkew fires while the median skew is beyond max_skew either way.
func TestEngine_ClockSkew(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var mu sync.Mutex
	skew, n := 3*time.Minute, 0
	e := f.engine(t, []alert.Rule{{Name: "skew", Kind: alert.KindClockSkew, MaxSkew: 2 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.ClockSkew = func() (time.Duration, int) { mu.Lock(); defer mu.Unlock(); return skew, n }
		})
	f.evaluate(t, e) // no deliveries: nothing to say
	wantEvents(t, h)
	mu.Lock()
	skew, n = -3*time.Minute, 12
	mu.Unlock()
	f.evaluate(t, e)
	mu.Lock()
	skew = 90 * time.Second
	mu.Unlock()
	f.settle(t, e)
	wantEvents(t, h, "alert.opened skew", "alert.resolved skew")
	if s := h.payloads()[0].Data.Summary; !strings.Contains(s, "3m0s behind") {
		t.Errorf("summary %q", s)
	}
}

// TestEngine_RetryWithBackoff: a channel answering 500 gets the notification again
// after a backoff, with the same webhook-id, and not before.
func TestEngine_RetryWithBackoff(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 1)
	var mu sync.Mutex
	var ready error = errors.New("down")
	var told notified
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
			c.Notified = told.add
		})
	f.evaluate(t, e)
	if h.count() != 1 || len(h.payloads()) != 0 {
		t.Fatalf("requests %d, taken %d; want 1 refused", h.count(), len(h.payloads()))
	}
	as := f.alerts(t)
	if as[0].PendingNotifications != 1 || as[0].LastNotificationError != "POST: HTTP 500" {
		t.Fatalf("alert = %+v, want one pending notification and its error", as[0])
	}
	f.evaluate(t, e) // the backoff (about 1s) has not passed
	if h.count() != 1 {
		t.Fatalf("retried before the backoff: %d requests", h.count())
	}
	f.clock.Add(2 * time.Second)
	f.evaluate(t, e)
	wantEvents(t, h, "alert.opened db")
	if h.count() != 2 || !strings.HasPrefix(h.payloadIDs()[0], "alert_notification_") {
		t.Fatalf("requests %d, ids %v", h.count(), h.payloadIDs())
	}
	as = f.alerts(t)
	if as[0].PendingNotifications != 0 || as[0].SentNotifications != 1 {
		t.Fatalf("alert = %+v, want its notification sent", as[0])
	}
	if got := told.String(); got != "ops retry, ops sent" {
		t.Errorf("results told (the metric's): %s; want ops retry, ops sent", got)
	}
}

// notified gathers what Config.Notified is told, as the metric counts it.
type notified struct {
	mu   sync.Mutex
	told []string
}

func (n *notified) add(channel, result string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.told = append(n.told, channel+" "+result)
}

func (n *notified) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.told, ", ")
}

// TestEngine_GivesUp: after the channel's last attempt the notification is failed and
// logged, not retried for ever.
func TestEngine_GivesUp(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 100)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeWebhook, URL: h.srv.URL, Secrets: []string{hookSecret},
		MaxAttempts: 3, MaxBackoff: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var told notified
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}}, []*alert.Channel{c},
		func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("down") }
			c.Notified = told.add
		})
	for range 6 {
		f.evaluate(t, e)
		f.clock.Add(2 * time.Second)
	}
	if h.count() != 3 {
		t.Errorf("%d requests, want 3 (max_attempts)", h.count())
	}
	if as := f.alerts(t); as[0].FailedNotifications != 1 {
		t.Errorf("alert = %+v, want its notification failed", as[0])
	}
	if !strings.Contains(f.logs.String(), "alert notification given up") {
		t.Errorf("log does not say it gave up:\n%s", f.logs.String())
	}
	if got := told.String(); got != "ops retry, ops retry, ops failed" {
		t.Errorf("results told (the metric's): %s; want ops retry, ops retry, ops failed", got)
	}
}

// TestEngine_ResolveByHand: a user's resolution notifies the channels (and names the
// user) and is audited; the engine does not resolve it again.
func TestEngine_ResolveByHand(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	s := newSlack(t)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops", "chat"}}},
		[]*alert.Channel{h.channel(t, "ops"), s.channel(t, "chat")},
		func(c *alert.Config) { c.Ready = func(context.Context) error { return errors.New("down") } })
	f.evaluate(t, e)
	id := f.alerts(t)[0].ID
	ctx := context.Background()
	if _, err := f.db.AcknowledgeAlert(ctx, id, "sam", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AcknowledgeAlert(ctx, id, "sam", f.clock.Now()); !errors.Is(err, storage.ErrAlertState) {
		t.Fatalf("second acknowledgement: %v, want ErrAlertState", err)
	}
	if _, err := f.db.ResolveAlert(ctx, id, "kim", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, h, "alert.opened db", "alert.resolved db")
	if by := h.payloads()[1].Data.ResolvedBy; by != "kim" {
		t.Errorf("resolved_by = %q", by)
	}
	texts := s.received()
	if len(texts) != 2 || !strings.Contains(texts[1], "resolved by kim") {
		t.Errorf("slack got %q", texts)
	}
	audit, err := f.db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || audit[0].Action != "resolve alert" || audit[0].Actor != "kim" || audit[1].Action != "acknowledge alert" ||
		audit[1].Actor != "sam" || audit[0].PreviousState != storage.AlertAcknowledged {
		t.Errorf("audit = %+v", audit)
	}
	a, err := f.db.GetAlert(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.AcknowledgedBy != "sam" || a.ResolvedBy != "kim" || a.State != storage.AlertResolved {
		t.Errorf("alert = %+v", a)
	}
}

// TestEngine_ResolveByHandReopensAtOnceWithFor: an operator resolves an alert by hand
// while its condition still holds. The next evaluation opens a new one, also for a
// rule with `for`: the condition has held all along, for longer than its for, and no
// new wait starts (with for = 10m, the page would be silent for ten minutes while the
// problem goes on).
func TestEngine_ResolveByHandReopensAtOnceWithFor(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, For: 10 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")},
		func(c *alert.Config) { c.Ready = func(context.Context) error { return errors.New("down") } })
	for range 12 { // eleven minutes of the condition holding: the alert opens after ten
		f.evaluate(t, e)
		f.clock.Add(time.Minute)
	}
	as := f.alerts(t)
	if len(as) != 1 || !as[0].Active() {
		t.Fatalf("alerts %+v; want one open", as)
	}
	if _, err := f.db.ResolveAlert(context.Background(), as[0].ID, "kim", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(5 * time.Second)
	f.evaluate(t, e) // the next evaluation, the condition still holding
	as = f.alerts(t)
	if len(as) != 2 || !as[0].Active() || as[1].Active() {
		t.Fatalf("after resolving by hand while the database is still down, the next evaluation left alerts %+v; "+
			"want a new one open beside the resolved one (the condition has held for 11 minutes, more than its for of 10m)", as)
	}
	// The new opening waits for the resolution by hand: the channel hears them in their
	// order, and does not end reading the outage as over.
	if _, err := e.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range h.payloads() {
		got = append(got, fmt.Sprintf("%s %d", p.Type, p.Data.ID))
	}
	want := []string{fmt.Sprintf("alert.opened %d", as[1].ID), fmt.Sprintf("alert.resolved %d", as[1].ID), fmt.Sprintf("alert.opened %d", as[0].ID)}
	if !slices.Equal(got, want) {
		t.Errorf("webhook got %q; want %q: the first alert's opening, then its resolution and the new one's opening", got, want)
	}
}

// TestEngine_RuleRemoved: an alert whose rule is no longer configured (removed or
// renamed, then serve restarted) is resolved by the engine, which can no longer tell
// whether its condition holds; with no rule left at all too. Left active, it would
// stay open on the page and in the API for good.
func TestEngine_RuleRemoved(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	down := func(c *alert.Config) { c.Ready = func(context.Context) error { return errors.New("down") } }
	old := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, down)
	f.evaluate(t, old)
	wantEvents(t, h, "alert.opened db")

	// Restarted with the rule renamed: the new one opens; the old one's alert resolves
	// once no one has seen its condition hold for DefaultClearFor (another replica may
	// still run the old configuration).
	renamed := f.engine(t, []alert.Rule{{Name: "database", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, down)
	f.clock.Add(time.Minute)
	f.evaluate(t, renamed)
	if as := f.alerts(t); len(as) != 2 || !as[1].Active() {
		t.Fatalf("alerts a minute after the rename = %+v, want the old one still active", as)
	}
	f.clock.Add(alert.DefaultClearFor)
	f.evaluate(t, renamed)
	// Sent in one pass, concurrently: in either order.
	var got []string
	for _, p := range h.payloads()[1:] {
		got = append(got, p.Type+" "+p.Data.Rule)
	}
	slices.Sort(got)
	if want := []string{"alert.opened database", "alert.resolved db"}; !slices.Equal(got, want) {
		t.Fatalf("webhook got %q after the rename, want %q", got, want)
	}
	if as := f.alerts(t); len(as) != 2 || as[0].Rule != "database" || !as[0].Active() || as[1].State != storage.AlertResolved ||
		as[1].ResolvedBy != storage.ResolvedRuleRemoved {
		t.Fatalf("alerts = %+v, want database active and db resolved for its rule's removal", as)
	}
	// Told as what happened: the condition may well still hold.
	for _, p := range h.payloads()[1:] {
		if p.Type != "alert.resolved" {
			continue
		}
		if !p.Data.RuleRemoved || p.Data.ResolvedBy != "" || !strings.Contains(p.Data.Text, "its rule was removed") ||
			strings.Contains(p.Data.Text, "condition cleared") {
			t.Errorf("resolution told as %+v, want its rule's removal", p.Data)
		}
	}

	// Restarted with no rule and no channel, once no one has held it for DefaultClearFor:
	// one pass resolves what is left, then Run returns.
	f.clock.Add(alert.DefaultClearFor)
	none := f.engine(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	none.Run(ctx)
	if as := f.alerts(t); as[0].State != storage.AlertResolved {
		t.Fatalf("alert = %+v, want resolved once its rule is gone", as[0])
	}
}

// flap is a condition that a test turns on and off, watched by a disk_space rule.
type flap struct {
	mu sync.Mutex
	on bool
}

func (c *flap) set(on bool) { c.mu.Lock(); c.on = on; c.mu.Unlock() }

func (c *flap) config(cfg *alert.Config) {
	cfg.DiskFree = func() (uint64, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.on {
			return 1 << 20, nil
		}
		return 1 << 40, nil
	}
}

// TestEngine_Flapping: a condition hovering at its threshold (on at one evaluation, off
// at the next, for an hour) keeps one alert open and sends one "opened"; once it has
// stayed clear for the rule's clear_for, one "resolved"; and not a moment before.
func TestEngine_Flapping(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var c flap
	e := f.engine(t, []alert.Rule{{Name: "disk", Kind: alert.KindDiskSpace, MinFree: 1 << 30, ClearFor: 3 * time.Minute,
		Channels: []string{"ops"}}}, []*alert.Channel{h.channel(t, "ops")}, c.config)
	for i := range 720 { // an hour of evaluations every 5 s
		c.set(i%2 == 0)
		f.evaluate(t, e)
		f.clock.Add(5 * time.Second)
	}
	wantEvents(t, h, "alert.opened disk")
	// Clear since the last evaluation above: the alert stays open until 3m have passed.
	for f.clock.Now().Before(t0.Add(time.Hour + 3*time.Minute - 5*time.Second)) {
		f.evaluate(t, e)
		f.clock.Add(5 * time.Second)
	}
	if as := f.alerts(t); len(as) != 1 || !as[0].Active() {
		t.Fatalf("alerts = %+v, want the one alert still open within clear_for", as)
	}
	f.evaluate(t, e) // 3m clear
	wantEvents(t, h, "alert.opened disk", "alert.resolved disk")
	if as := f.alerts(t); len(as) != 1 || as[0].State != storage.AlertResolved || as[0].ResolvedBy != "" {
		t.Fatalf("alerts = %+v, want the one alert resolved by itself", as)
	}
}

// TestEngine_ClearForAcrossRestart: an engine restarted while the condition of an open
// alert is clear does not resolve it at once (it cannot know for how long it has been
// clear): it waits clear_for from its own start, so that restarts during a flapping
// condition send nothing either.
func TestEngine_ClearForAcrossRestart(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var c flap
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "disk", Kind: alert.KindDiskSpace, MinFree: 1 << 30, Channels: []string{"ops"}}}
	}
	c.set(true)
	f.evaluate(t, f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, c.config))
	c.set(false)
	for range 5 { // five restarts, each while the condition is clear, each followed by a flap
		e := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, c.config)
		f.evaluate(t, e)
		f.clock.Add(alert.DefaultClearFor - time.Second)
		f.evaluate(t, e)
		c.set(true)
		f.evaluate(t, e)
		c.set(false)
	}
	wantEvents(t, h, "alert.opened disk")
	e := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, c.config)
	f.settle(t, e)
	wantEvents(t, h, "alert.opened disk", "alert.resolved disk")
}

// TestEngine_ClockSkewOfOneMachine: replicas on several machines share one database. A
// machine whose clock is off opens clock_skew under its own name, and a replica on a
// machine whose clock is right leaves that alert alone instead of resolving it (to see
// it opened again, over and over); the machine resolves it once its clock is right.
func TestEngine_ClockSkewOfOneMachine(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var mu sync.Mutex
	skewA := 5 * time.Minute
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "skew", Kind: alert.KindClockSkew, Channels: []string{"ops"}}}
	}
	a := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
		c.Machine = "hotel-a"
		c.ClockSkew = func() (time.Duration, int) { mu.Lock(); defer mu.Unlock(); return skewA, 50 }
	})
	b := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
		c.Machine = "hotel-b"
		c.ClockSkew = func() (time.Duration, int) { return 0, 50 }
	})
	for range 60 { // five minutes, both replicas every 5 s
		f.evaluate(t, a)
		f.evaluate(t, b)
		f.clock.Add(5 * time.Second)
	}
	wantEvents(t, h, "alert.opened skew hotel-a")
	if as := f.alerts(t); len(as) != 1 || as[0].Subject != "hotel-a" {
		t.Fatalf("alerts %+v; want one, of hotel-a", as)
	}
	mu.Lock()
	skewA = 0
	mu.Unlock()
	for range 60 {
		f.evaluate(t, a)
		f.evaluate(t, b)
		f.clock.Add(5 * time.Second)
	}
	wantEvents(t, h, "alert.opened skew hotel-a", "alert.resolved skew hotel-a")
}

// unstorableAlerts is a database that cannot store an alert while down is set: a commit
// that fails now and then, its readiness check failing all along.
type unstorableAlerts struct {
	*sqlite.DB
	down *atomic.Bool
}

func (s unstorableAlerts) OpenAlert(ctx context.Context, a storage.Alert, at time.Time) (storage.Alert, bool, error) {
	if s.down.Load() {
		return storage.Alert{}, false, errors.New("disk I/O error")
	}
	return s.DB.OpenAlert(ctx, a, at)
}

// TestEngine_DatabaseNotReadyToldOnce: a database_not_ready alert told to the channels
// straight away, since it could not be stored, and stored at a later evaluation is not
// told again from the outbox; its resolution is told once.
func TestEngine_DatabaseNotReadyToldOnce(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var down atomic.Bool
	var mu sync.Mutex
	ready := errors.New("ping: slow commit")
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
		})
	down.Store(true)
	_ = e.Evaluate(context.Background()) // cannot store it: told straight away
	e.WaitDirect()
	down.Store(false)
	f.clock.Add(5 * time.Second)
	f.evaluate(t, e) // stored now
	if as := f.alerts(t); len(as) != 1 || !as[0].Active() {
		t.Fatalf("alerts %+v; want the one, stored and open", as)
	}
	mu.Lock()
	ready = nil
	mu.Unlock()
	f.settle(t, e)
	wantEvents(t, h, "alert.opened db", "alert.resolved db")
}

// TestEngine_DirectAlertResolvedAfterRestart: the database cannot store the
// database_not_ready alert (a full disk), so its channel is told of the opening
// straight away. The alert is stored, its opening told, as soon as the database
// takes it: at an evaluation, or at the latest as serve stops. The usual remedy, space
// freed and serve restarted, then ends in one resolution, told through the outbox by
// the new process, which would otherwise know nothing of an alert its channels were
// told of.
func TestEngine_DirectAlertResolvedAfterRestart(t *testing.T) {
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}}
	}
	notReady := func(context.Context) error { return errors.New("database or disk is full") }
	// restart runs a new engine on the healthy database for ten minutes of
	// evaluations, five times the clear_for.
	restart := func(t *testing.T, f *fixture, h *hook) {
		t.Helper()
		as := f.alerts(t)
		if len(as) != 1 || !as[0].Active() || as[0].PendingNotifications != 0 {
			t.Fatalf("alerts before the restart %+v; want the one told straight away, stored, nothing left to tell of its opening", as)
		}
		after := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")})
		for range 60 {
			f.evaluate(t, after)
			f.clock.Add(10 * time.Second)
		}
		wantEvents(t, h, "alert.opened db", "alert.resolved db")
		if as := f.alerts(t); len(as) != 1 || as[0].Active() {
			t.Errorf("alerts after the restart %+v; want the one, resolved", as)
		}
	}

	t.Run("FreedThenRestarted", func(t *testing.T) {
		f := newFixture(t)
		h := newHook(t, 0)
		var down atomic.Bool
		down.Store(true)
		before := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = notReady
			c.Interval = time.Hour // one evaluation, at the start
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); before.Run(ctx) }()
		if _, ok := waitFor(10*time.Second, func() bool { return len(h.payloads()) > 0 }); !ok {
			cancel()
			<-done
			t.Fatal("the channel was never told of the outage")
		}
		down.Store(false) // space freed
		cancel()          // and serve restarted at once, before its next evaluation
		<-done
		f.clock.Add(30 * time.Second)
		restart(t, f, h)
	})

	t.Run("ClearedThenRestarted", func(t *testing.T) {
		f := newFixture(t)
		h := newHook(t, 0)
		var down atomic.Bool
		down.Store(true)
		before := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = func(ctx context.Context) error {
				if down.Load() {
					return notReady(ctx)
				}
				return nil
			}
		})
		_ = before.Evaluate(context.Background()) // cannot store it: told straight away
		before.WaitDirect()
		// Space freed: writes pass and the condition is clear. The next evaluation
		// stores the alert; serve is restarted before it has been clear for clear_for.
		down.Store(false)
		f.clock.Add(5 * time.Second)
		f.evaluate(t, before)
		f.clock.Add(30 * time.Second)
		restart(t, f, h)
	})
}

// TestEngine_DirectOpeningCutByStopToldAfterRestart: the database cannot store the
// database_not_ready alert, so its opening is sent straight away, to a channel that
// hangs. Space is freed and serve stops while that send is under way: the send is cut,
// the channel never took the opening, and the alert is stored at the stop with its
// opening queued for that channel. The next start tells it the opening, then, once the
// condition clears, the resolution: never a resolution alone.
func TestEngine_DirectOpeningCutByStopToldAfterRestart(t *testing.T) {
	f := newFixture(t)
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}}
	}
	notReady := func(context.Context) error { return errors.New("ping: database is locked") }
	slowSrv, slowGot := hangingHook(t)
	var down atomic.Bool
	down.Store(true)
	before := f.engine(t, rules(), []*alert.Channel{hangingChannel(t, "ops", slowSrv.URL, 30*time.Second)},
		func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = notReady
			c.Interval = time.Hour
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); before.Run(ctx) }()
	if _, ok := waitFor(10*time.Second, func() bool { return slowGot.Load() > 0 }); !ok {
		cancel()
		<-done
		t.Fatal("the opening was never attempted")
	}
	down.Store(false) // the database takes writes again
	cancel()          // serve stops while the opening is still being sent: cut, never received
	<-done

	f.clock.Add(10 * time.Second)
	h := newHook(t, 0)
	var ready atomic.Bool
	after := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
		c.Ready = func(ctx context.Context) error {
			if ready.Load() {
				return nil
			}
			return notReady(ctx)
		}
	})
	for range 6 { // a minute of evaluations, the condition still holding
		f.evaluate(t, after)
		f.clock.Add(10 * time.Second)
	}
	told := len(h.payloads())
	ready.Store(true) // then the condition clears for good
	for range 60 {
		f.evaluate(t, after)
		f.clock.Add(10 * time.Second)
	}
	if told == 0 {
		var got []string
		for _, p := range h.payloads() {
			got = append(got, p.Type)
		}
		t.Errorf("the channel was never told of the alert's opening (its only send was cut by the stop, yet it was "+
			"stored as told); all it ever got: %q", got)
	}
	wantEvents(t, h, "alert.opened db", "alert.resolved db")
}
