package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

const alertColumns = `a.id, a.rule, a.kind, a.subject, a.state, a.summary, a.value, a.channels, a.opened_at, a.updated_at,
	a.acknowledged_by, a.acknowledged_at, a.resolved_by, a.resolved_at, a.held_at`

// alertFields are the destinations of alertColumns in a scan, and finish fills a from
// what they read.
type alertFields struct {
	a                                      *storage.Alert
	channels                               string
	opened, updated, acked, resolved, held int64
}

func newAlertFields(a *storage.Alert) *alertFields { return &alertFields{a: a} }

func (f *alertFields) dest() []any {
	a := f.a
	return []any{&a.ID, &a.Rule, &a.Kind, &a.Subject, &a.State, &a.Summary, &a.Value, &f.channels, &f.opened, &f.updated,
		&a.AcknowledgedBy, &f.acked, &a.ResolvedBy, &f.resolved, &f.held}
}

func (f *alertFields) finish() {
	a := f.a
	a.Channels = nil
	if f.channels != "" {
		a.Channels = strings.Split(f.channels, ",")
	}
	a.OpenedAt, a.UpdatedAt, a.HeldAt = fromMillis(f.opened), fromMillis(f.updated), fromMillis(f.held)
	a.AcknowledgedAt, a.ResolvedAt = fromMillis(f.acked), fromMillis(f.resolved)
}

func scanAlert(s scanner) (storage.Alert, error) {
	var a storage.Alert
	f := newAlertFields(&a)
	if err := s.Scan(f.dest()...); err != nil {
		return storage.Alert{}, err
	}
	f.finish()
	return a, nil
}

// Alerts returns the alerts f selects, newest first, each with how its notifications
// fared.
func (db *DB) Alerts(ctx context.Context, f storage.AlertFilter) ([]storage.Alert, error) {
	query, args, err := alertsQuery(f)
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	var out []storage.Alert
	for rows.Next() {
		var a storage.Alert
		fields := newAlertFields(&a)
		dest := append(fields.dest(),
			&a.PendingNotifications, &a.FailedNotifications, &a.SentNotifications, &a.LastNotificationError)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("alerts: %w", err)
		}
		fields.finish()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return out, nil
}

// alertsQuery is the query of a page of Alerts for f, with its arguments.
func alertsQuery(f storage.AlertFilter) (string, []any, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	// The active alerts (open or acknowledged) are few, however many have resolved:
	// their tabs say state <> 'resolved', the condition of the partial index
	// alerts_active, so that the planner may read them through it instead of walking
	// every alert by id. The resolved ones are nearly all rows: the walk by id suits them.
	where := "a.id < $1"
	args := []any{before, f.Limit}
	switch f.State {
	case "", "active":
		where += " AND a.state <> 'resolved'"
	case storage.AlertOpen, storage.AlertAcknowledged:
		where += " AND a.state <> 'resolved' AND a.state = $3"
		args = append(args, f.State)
	case storage.AlertResolved:
		where += " AND a.state = $3"
		args = append(args, f.State)
	case "all":
	default:
		return "", nil, fmt.Errorf("alerts: unknown state %q", f.State)
	}
	return `SELECT ` + alertColumns + `, c.pending, c.failed, c.sent,
		coalesce((SELECT n.last_error FROM alert_notifications n WHERE n.alert = a.id AND n.last_error <> ''
			ORDER BY n.id DESC LIMIT 1), '')
		FROM alerts a CROSS JOIN LATERAL (SELECT
			count(*) FILTER (WHERE n.state = 'pending') AS pending,
			count(*) FILTER (WHERE n.state = 'failed') AS failed,
			count(*) FILTER (WHERE n.state = 'sent') AS sent
			FROM alert_notifications n WHERE n.alert = a.id) c
		WHERE ` + where + ` ORDER BY a.id DESC LIMIT $2`, args, nil
}

// GetAlert returns one alert. Returns ErrNotFound if there is none with that id.
func (db *DB) GetAlert(ctx context.Context, id int64) (storage.Alert, error) {
	a, err := alertIn(ctx, db.pool, id, "")
	if err != nil {
		return storage.Alert{}, fmt.Errorf("alert %d: %w", id, err)
	}
	return a, nil
}

// ActiveAlerts returns every open or acknowledged alert, oldest first. Its condition is
// the partial index alerts_active's: the engine asks every few seconds, and resolved
// alerts pile up until the sweep (SweepAlerts).
func (db *DB) ActiveAlerts(ctx context.Context) ([]storage.Alert, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.state <> 'resolved' ORDER BY a.id`)
	if err != nil {
		return nil, fmt.Errorf("active alerts: %w", err)
	}
	defer rows.Close()
	var out []storage.Alert
	for rows.Next() {
		a, err := scanAlert(rows)
		if err != nil {
			return nil, fmt.Errorf("active alerts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("active alerts: %w", err)
	}
	return out, nil
}

// openAlertTries bounds how often OpenAlert looks again for an active alert that
// refused its insert and was resolved before it could be read.
const openAlertTries = 5

// OpenAlert opens an alert of a.Rule on a.Subject at time at, with a notification of
// its opening to each of a.Channels, in one transaction. When an alert of that rule and
// subject is already active it is left as it is and returned with opened false.
//
// Every replica's alert engine sees the same condition at about the same time: the
// insert is one INSERT … ON CONFLICT DO NOTHING on the partial unique index of active
// alerts (alerts_active), so of any number of concurrent openings exactly one inserts,
// and only that one writes notifications. The others wait for its commit, then find
// the row it inserted.
func (db *DB) OpenAlert(ctx context.Context, a storage.Alert, at time.Time) (_ storage.Alert, opened bool, err error) {
	channels := make([]string, len(a.Channels))
	for i, c := range a.Channels {
		if c == "" || strings.Contains(c, ",") {
			return storage.Alert{}, false, fmt.Errorf("open alert %s: channel name %q is empty or holds a comma", a.Rule, c)
		}
		channels[i] = storage.ReplacedText(c)
	}
	rule, subject := storage.ReplacedText(a.Rule), storage.ReplacedText(a.Subject)
	var out storage.Alert
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		opened = false
		for range openAlertTries {
			var id int64
			err := tx.QueryRow(ctx, `INSERT INTO alerts (rule, kind, subject, state, summary, value, channels, opened_at, updated_at, held_at)
				VALUES ($1, $2, $3, 'open', $4, $5, $6, $7, $7, $7)
				ON CONFLICT (rule, subject) WHERE state <> 'resolved' DO NOTHING RETURNING id`,
				rule, storage.ReplacedText(a.Kind), subject, storage.ReplacedText(a.Summary), storage.ReplacedText(a.Value),
				strings.Join(channels, ","), millis(at)).Scan(&id)
			if err == nil {
				opened = true
				if untold := a.UntoldOfOpening(); len(untold) > 0 {
					for i, c := range untold {
						untold[i] = storage.ReplacedText(c)
					}
					if err := insertNotifications(ctx, tx, id, untold, storage.AlertOpened, storage.ReplacedText(a.Summary),
						storage.ReplacedText(a.Value), "", at); err != nil {
						return err
					}
				}
				out, err = alertIn(ctx, tx, id, "")
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			// Each statement reads what was committed when it began, so this one sees
			// the active alert that refused the insert, unless it was resolved
			// meanwhile: then the insert is tried again.
			out, err = scanAlert(tx.QueryRow(ctx, `SELECT `+alertColumns+` FROM alerts a
				WHERE a.rule = $1 AND a.subject = $2 AND a.state <> 'resolved'`, rule, subject))
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return fmt.Errorf("the active alert was resolved each time, %d times, before it could be read", openAlertTries)
	})
	if err != nil {
		return storage.Alert{}, false, fmt.Errorf("open alert %s on %q: %w", a.Rule, a.Subject, err)
	}
	return out, opened, nil
}

// HoldAlert records that an evaluation found the condition of an active alert holding at
// time at, and what the rule measured then. It sends nothing: notifications are for
// transitions only. Of replicas holding it at once, the latest time stays; a hold
// recorded before the clock was set back (further ahead of at than
// storage.ClockSetBackSlack) gives way to at.
func (db *DB) HoldAlert(ctx context.Context, id int64, summary, value string, at time.Time) error {
	summary, value = storage.ReplacedText(summary), storage.ReplacedText(value)
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE alerts SET held_at = CASE WHEN held_at > $3::bigint + $5::bigint THEN $3 ELSE greatest(held_at, $3) END,
			summary = $1, value = $2, updated_at = CASE WHEN summary <> $1 OR value <> $2 THEN $3 ELSE updated_at END
			WHERE id = $4 AND state <> 'resolved'`, summary, value, millis(at), id, storage.ClockSetBackSlack.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("hold alert %d: %w", id, err)
	}
	return nil
}

// AcknowledgeAlert marks an open alert acknowledged by actor, audited in the same
// transaction. Returns ErrNotFound for an unknown alert and ErrAlertState for one that
// is not open. The alert's row is locked first, so that a replica resolving it at the
// same time either goes first (and this finds it resolved) or waits for this.
func (db *DB) AcknowledgeAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error) {
	actor = storage.ReplacedText(actor)
	var out storage.Alert
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		a, err := alertIn(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if a.State != storage.AlertOpen {
			return storage.ErrAlertState
		}
		out, err = scanAlert(tx.QueryRow(ctx, `UPDATE alerts a SET state = 'acknowledged', acknowledged_by = $1,
			acknowledged_at = $2, updated_at = $2 WHERE a.id = $3 RETURNING `+alertColumns, actor, millis(at), id))
		if err != nil {
			return err
		}
		return db.insertAudit(ctx, tx, storage.AuditEntry{At: at, Actor: actor, Action: "acknowledge alert",
			Source: a.Subject, Reason: alertLabel(a), PreviousState: a.State})
	})
	if err != nil {
		return storage.Alert{}, fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	return out, nil
}

// ResolveAlert resolves an active alert, with a notification of it to each of the
// alert's channels, in one transaction. actor "" means it resolved by itself (its
// condition cleared), ResolvedRuleRemoved that its rule was removed; a user's
// resolution is audited in the same transaction. Returns ErrNotFound for an unknown
// alert and ErrAlertState for one already resolved. The alert's row is locked first:
// of two replicas resolving one alert at once, one resolves it and writes its
// notifications, the other gets ErrAlertState.
func (db *DB) ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error) {
	return db.resolveAlert(ctx, id, actor, at, -1)
}

// ClearAlert resolves an active alert by itself, its condition clear, when no
// evaluation, of any replica, found it holding within clearFor before at; ErrAlertHeld
// otherwise. A replica's HoldAlert committed before this locked the row is seen here;
// one after it finds the alert resolved, and the condition opens a new one.
func (db *DB) ClearAlert(ctx context.Context, id int64, clearFor time.Duration, at time.Time) (storage.Alert, error) {
	return db.resolveAlert(ctx, id, "", at, clearFor)
}

// resolveAlert is ResolveAlert, and ClearAlert when clearFor is not negative: then the
// alert must not have been held within it (storage.Alert.HeldWithin).
func (db *DB) resolveAlert(ctx context.Context, id int64, actor string, at time.Time, clearFor time.Duration) (storage.Alert, error) {
	actor = storage.ReplacedText(actor)
	var out storage.Alert
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		a, err := alertIn(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if !a.Active() {
			return storage.ErrAlertState
		}
		if clearFor >= 0 && a.HeldWithin(clearFor, at) {
			return storage.ErrAlertHeld
		}
		out, err = scanAlert(tx.QueryRow(ctx, `UPDATE alerts a SET state = 'resolved', resolved_by = $1, resolved_at = $2,
			updated_at = $2 WHERE a.id = $3 RETURNING `+alertColumns, actor, millis(at), id))
		if err != nil {
			return err
		}
		if err := insertNotifications(ctx, tx, id, a.Channels, storage.AlertResolvedEvent, a.Summary, a.Value, actor, at); err != nil {
			return err
		}
		if actor == "" || actor == storage.ResolvedRuleRemoved {
			return nil
		}
		return db.insertAudit(ctx, tx, storage.AuditEntry{At: at, Actor: actor, Action: "resolve alert",
			Source: a.Subject, Reason: alertLabel(a), PreviousState: a.State})
	})
	if err != nil {
		return storage.Alert{}, fmt.Errorf("resolve alert %d: %w", id, err)
	}
	return out, nil
}

// alertLabel names an alert in the audit log.
func alertLabel(a storage.Alert) string {
	s := fmt.Sprintf("alert %d: %s", a.ID, a.Rule)
	if a.Subject != "" {
		s += " on " + a.Subject
	}
	return s
}

// alertIn reads alert id through q, with lock ("" or a locking clause) appended.
// Returns ErrNotFound if there is none.
func alertIn(ctx context.Context, q querier, id int64, lock string) (storage.Alert, error) {
	a, err := scanAlert(q.QueryRow(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.id = $1 `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Alert{}, storage.ErrNotFound
	}
	return a, err
}

// insertNotifications writes one notification of event per channel, due at once, in the
// channels' order.
func insertNotifications(ctx context.Context, tx pgx.Tx, alert int64, channels []string, event, summary, value, actor string, at time.Time) error {
	if len(channels) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO alert_notifications (alert, channel, event, summary, value, actor, created_at, next_attempt_at)
		SELECT $1::bigint, c.channel, $3::text, $4::text, $5::text, $6::text, $7::bigint, $7::bigint FROM unnest($2::text[]) WITH ORDINALITY AS c(channel, i) ORDER BY c.i`,
		alert, channels, event, summary, value, actor, millis(at))
	if err != nil {
		return fmt.Errorf("notifications to %s: %w", strings.Join(channels, ", "), err)
	}
	return nil
}

// sqlLeaseNotifications leases up to $2 notifications due at $1 until $3 and returns
// them with their alerts, oldest due first. The due ones are locked FOR UPDATE SKIP
// LOCKED: a replica leasing at the same time skips those this statement holds, and one
// whose statement began before this lease committed finds, on locking the row, that it
// is no longer due (PostgreSQL checks the conditions again on the row's newest
// version). No notification is leased by two senders at once; one whose lease ended
// without a FinishNotification (its sender died) is due again and leased anew.
const sqlLeaseNotifications = `WITH due AS (
	SELECT id, next_attempt_at FROM alert_notifications AS n
	WHERE state = 'pending' AND next_attempt_at <= $1 AND ($4::text[] IS NULL OR channel = ANY($4))
		AND NOT ` + sqlToldEarlierFirst + `
	ORDER BY next_attempt_at, id LIMIT $2
	FOR UPDATE SKIP LOCKED
), leased AS (
	UPDATE alert_notifications n SET next_attempt_at = $3 FROM due WHERE n.id = due.id
	RETURNING n.id, n.alert, n.channel, n.event, n.summary, n.value, n.actor, n.created_at, n.attempts,
		due.next_attempt_at AS due_at
)
SELECT n.id, n.channel, n.event, n.summary, n.value, n.actor, n.created_at, n.attempts, ` + alertColumns + `
FROM leased n JOIN alerts a ON a.id = n.alert
ORDER BY n.due_at, n.id`

// GiveUpNotifications gives up the notifications pending to channels other than
// channels that were due before before and that no sender has leased since (see
// storage.Store).
func (db *DB) GiveUpNotifications(ctx context.Context, channels []string, before time.Time) (int64, error) {
	if channels == nil {
		return 0, nil // nil names every channel
	}
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alert_notifications SET state = 'failed',
	last_error = 'channel ' || channel || ' is no longer configured'
WHERE state = 'pending' AND next_attempt_at < $1 AND NOT channel = ANY($2::text[])`, millis(before), channels)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("give up notifications: %w", err)
	}
	return n, nil
}

// sqlToldEarlierFirst is true for a notification n that has an earlier notification to
// the same channel still pending (being sent, or waiting for its retry) of its alert or
// of an earlier alert of the same rule and subject: a channel hears of the transitions
// in their order, never "resolved" before the "opened" that a failed attempt held back,
// nor the "opened" of an alert that reopened (resolved by hand while its condition
// held) before the previous alert's "resolved", which would leave it reading the
// outage as over.
const sqlToldEarlierFirst = `EXISTS (SELECT 1 FROM alert_notifications AS e
	JOIN alerts AS ea ON ea.id = e.alert JOIN alerts AS na ON na.id = n.alert
	WHERE e.channel = n.channel AND e.id < n.id AND e.state = 'pending' AND ea.rule = na.rule AND ea.subject = na.subject)`

// LeaseNotifications returns up to limit notifications due at now, oldest first, and
// leases them until now+lease: another sender, on this replica or another, skips them
// until then, and one that dies mid-send loses nothing.
func (db *DB) LeaseNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int, channels []string) ([]storage.Notification, error) {
	var out []storage.Notification
	leasedUntil := fromMillis(millis(now.Add(lease)))
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, sqlLeaseNotifications, millis(now), limit, millis(leasedUntil), channels)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n storage.Notification
			var at int64
			fields := newAlertFields(&n.Alert)
			dest := append([]any{&n.ID, &n.Channel, &n.Event, &n.Summary, &n.Value, &n.Actor, &at, &n.Attempts}, fields.dest()...)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			fields.finish()
			n.At, n.LeasedUntil = fromMillis(at), leasedUntil
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("lease notifications: %w", err)
	}
	return out, nil
}

// FinishNotification records an attempt to send notification n at time at, while n is
// pending under the lease it was given (storage.ErrLeaseLost otherwise): a sender that
// stalled past its lease, while another replica leased the notification again, neither
// lets a third lease it meanwhile nor writes over the other's outcome.
func (db *DB) FinishNotification(ctx context.Context, n storage.Notification, res storage.NotificationResult, at time.Time) error {
	var q string
	var args []any
	switch {
	case res.Sent:
		q, args = `UPDATE alert_notifications SET state = 'sent', attempts = attempts + 1, sent_at = $3, last_error = ''`,
			[]any{millis(at)}
	case res.Failed:
		q, args = `UPDATE alert_notifications SET state = 'failed', attempts = attempts + 1, last_error = $3`,
			[]any{storage.ReplacedText(res.Error)}
	case res.Returned:
		q, args = `UPDATE alert_notifications SET next_attempt_at = $3`, []any{millis(res.NextAt)}
	default:
		q, args = `UPDATE alert_notifications SET attempts = attempts + 1, next_attempt_at = $3, last_error = $4`,
			[]any{millis(res.NextAt), storage.ReplacedText(res.Error)}
	}
	var done int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q+` WHERE id = $1 AND state = 'pending' AND next_attempt_at = $2`,
			append([]any{n.ID, millis(n.LeasedUntil)}, args...)...)
		done = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("finish notification %d: %w", n.ID, err)
	}
	if done == 0 {
		return fmt.Errorf("finish notification %d: %w", n.ID, storage.ErrLeaseLost)
	}
	return nil
}

// NotificationCounts returns how many notifications are in each state (pending, sent,
// failed) per channel: channel → state → count.
func (db *DB) NotificationCounts(ctx context.Context) (map[string]map[string]int, error) {
	rows, err := db.pool.Query(ctx, `SELECT channel, state, count(*) FROM alert_notifications GROUP BY channel, state`)
	if err != nil {
		return nil, fmt.Errorf("notification counts: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var c, s string
		var n int
		if err := rows.Scan(&c, &s, &n); err != nil {
			return nil, fmt.Errorf("notification counts: %w", err)
		}
		if out[c] == nil {
			out[c] = map[string]int{}
		}
		out[c][s] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notification counts: %w", err)
	}
	return out, nil
}

// SweepAlerts deletes at most limit alerts resolved before cutoff, with their
// notifications, oldest first, through the index of resolved alerts, and returns how
// many alerts it deleted. An alert with a notification still being retried is kept
// until that is sent or given up on. Active alerts are never deleted: one per rule and
// subject at most, each with one notification per channel, they cannot pile up. Only
// one replica sweeps at a time (sweepAlertsLock); while another does, this deletes
// nothing and returns 0.
func (db *DB) SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if granted, err := db.tryLock(ctx, tx, sweepAlertsLock); err != nil || !granted {
			return err
		}
		tag, err := tx.Exec(ctx, sqlSweepAlerts, millis(cutoff), limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep resolved alerts: %w", err)
	}
	return n, nil
}

// sqlSweepAlerts deletes up to $2 alerts resolved before $1; their notifications go
// with them (ON DELETE CASCADE, through alert_notifications_alert). The state condition
// is alerts_resolved's, so that the planner can use that partial index. A pending
// notification of a resolved alert only ever leaves that state, and none is added to
// it: what this finds deletable stays so.
const sqlSweepAlerts = `DELETE FROM alerts WHERE id IN (
	SELECT id FROM alerts WHERE state = 'resolved' AND resolved_at < $1
		AND NOT EXISTS (SELECT 1 FROM alert_notifications n WHERE n.alert = alerts.id AND n.state = 'pending')
	ORDER BY resolved_at, id LIMIT $2)`

// What the alert rules read.

// MoneyMismatches returns, per source, how many duplicates received since since had an
// amount, currency or status that differs from their first delivery's.
func (db *DB) MoneyMismatches(ctx context.Context, since time.Time) (map[string]int64, error) {
	return db.countPerSource(ctx, "money mismatches", `SELECT source, count(*) FROM deliveries
		WHERE money_mismatch AND received_at >= $1 GROUP BY source`, millis(since))
}

// SignatureFailures returns, per source, how many deliveries received since since were
// refused with status (401: a bad or missing signature), stored ones and those only
// counted (rejection_counts) together. The counted ones are taken by whole minutes,
// from since's minute on.
func (db *DB) SignatureFailures(ctx context.Context, since time.Time, status int) (map[string]int64, error) {
	return db.countPerSource(ctx, "signature failures", `SELECT source, sum(n)::bigint FROM (
		SELECT source, count(*) AS n FROM deliveries
			WHERE outcome = 'rejected' AND received_at >= $1 AND status = $2 GROUP BY source
		UNION ALL
		SELECT source, sum(rejections) FROM rejection_counts
			WHERE minute >= $3 AND status = $2 GROUP BY source) t
		GROUP BY source`, millis(since), status, millis(since)/minuteMillis)
}

// FailingStreaks returns, for each source in sources, how many of its latest dispatch
// attempts failed in a row, counting at most limit. One query answers for every
// source: each reads its latest limit attempts through attempts_source_id, newest
// first, and counts them while none has succeeded (an empty error).
func (db *DB) FailingStreaks(ctx context.Context, sources []string, limit int) (map[string]int, error) {
	out := map[string]int{}
	if len(sources) == 0 {
		return out, nil
	}
	asked := make([]string, len(sources))
	for i, s := range sources {
		asked[i] = storage.ReplacedText(s)
	}
	rows, err := db.pool.Query(ctx, `SELECT s.i, f.n FROM unnest($1::text[]) WITH ORDINALITY AS s(source, i)
		CROSS JOIN LATERAL (
			SELECT count(*) FILTER (WHERE w.failing) AS n FROM (
				SELECT bool_and(l.error <> '') OVER (ORDER BY l.id DESC) AS failing
				FROM (SELECT id, error FROM attempts WHERE source = s.source AND error <> $3 ORDER BY id DESC LIMIT $2) l
			) w
		) f`, asked, limit, storage.AttemptInterrupted)
	if err != nil {
		return nil, fmt.Errorf("failing streaks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		var n int
		if err := rows.Scan(&i, &n); err != nil {
			return nil, fmt.Errorf("failing streaks: %w", err)
		}
		out[sources[i-1]] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failing streaks: %w", err)
	}
	return out, nil
}

// countPerSource runs query, whose rows are a source and a count, and returns the counts
// by source.
func (db *DB) countPerSource(ctx context.Context, what, query string, args ...any) (map[string]int64, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out[s] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
