package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

const alertColumns = `a.id, a.rule, a.kind, a.subject, a.state, a.summary, a.value, a.channels, a.opened_at, a.updated_at,
	a.acknowledged_by, a.acknowledged_at, a.resolved_by, a.resolved_at, a.held_at`

type rowScanner interface{ Scan(dest ...any) error }

// alertFields are the destinations of alertColumns in a scan, and finish fills a from
// what they read.
type alertFields struct {
	a                                      *storage.Alert
	channels                               string
	opened, updated, acked, resolved, held int64
}

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

func scanAlert(r rowScanner) (storage.Alert, error) {
	var a storage.Alert
	f := &alertFields{a: &a}
	if err := r.Scan(f.dest()...); err != nil {
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
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	var out []storage.Alert
	for rows.Next() {
		var a storage.Alert
		fields := &alertFields{a: &a}
		if err := rows.Scan(append(fields.dest(),
			&a.PendingNotifications, &a.FailedNotifications, &a.SentNotifications, &a.LastNotificationError)...); err != nil {
			return nil, fmt.Errorf("alerts: %w", err)
		}
		fields.finish()
		out = append(out, a)
	}
	return out, rows.Err()
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
	// their tabs read them through the partial index of active ones, whose condition
	// the query repeats word for word so that SQLite may use it, instead of walking
	// every alert by id. The resolved ones are nearly all rows: the walk by id suits them.
	from, where := "alerts a", "a.id < ?"
	args := []any{before}
	switch f.State {
	case "", "active":
		from, where = "alerts a INDEXED BY alerts_active", where+" AND a.state != 'resolved'"
	case storage.AlertOpen, storage.AlertAcknowledged:
		from, where = "alerts a INDEXED BY alerts_active", where+" AND a.state != 'resolved' AND a.state = ?"
		args = append(args, f.State)
	case storage.AlertResolved:
		where += " AND a.state = ?"
		args = append(args, f.State)
	case "all":
	default:
		return "", nil, fmt.Errorf("alerts: unknown state %q", f.State)
	}
	args = append(args, f.Limit)
	return `SELECT ` + alertColumns + `,
		(SELECT count(*) FROM alert_notifications n WHERE n.alert = a.id AND n.state = 'pending'),
		(SELECT count(*) FROM alert_notifications n WHERE n.alert = a.id AND n.state = 'failed'),
		(SELECT count(*) FROM alert_notifications n WHERE n.alert = a.id AND n.state = 'sent'),
		coalesce((SELECT n.last_error FROM alert_notifications n WHERE n.alert = a.id AND n.last_error != ''
			ORDER BY n.id DESC LIMIT 1), '')
		FROM ` + from + ` WHERE ` + where + ` ORDER BY a.id DESC LIMIT ?`, args, nil
}

// GetAlert returns one alert. Returns ErrNotFound if there is none with that id.
func (db *DB) GetAlert(ctx context.Context, id int64) (storage.Alert, error) {
	a, err := scanAlert(db.read.QueryRowContext(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Alert{}, fmt.Errorf("alert %d: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Alert{}, fmt.Errorf("alert %d: %w", id, err)
	}
	return a, nil
}

// sqlActiveAlerts reads the active alerts through their partial index: the engine asks
// every few seconds, and resolved alerts pile up until the sweep (SweepAlerts).
const sqlActiveAlerts = `SELECT ` + alertColumns + ` FROM alerts a INDEXED BY alerts_active WHERE a.state != 'resolved' ORDER BY a.id`

// ActiveAlerts returns every open or acknowledged alert, oldest first.
func (db *DB) ActiveAlerts(ctx context.Context) ([]storage.Alert, error) {
	rows, err := db.read.QueryContext(ctx, sqlActiveAlerts)
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
	return out, rows.Err()
}

// OpenAlert opens an alert of a.Rule on a.Subject at time at, with a notification of
// its opening to each of a.Channels, in one transaction. When an alert of that rule and
// subject is already active it is left as it is and returned with opened false.
func (db *DB) OpenAlert(ctx context.Context, a storage.Alert, at time.Time) (_ storage.Alert, opened bool, err error) {
	for _, c := range a.Channels {
		if c == "" || strings.Contains(c, ",") {
			return storage.Alert{}, false, fmt.Errorf("open alert %s: channel name %q is empty or holds a comma", a.Rule, c)
		}
	}
	var out storage.Alert
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		opened = false
		res, err := tx.ExecContext(ctx, `INSERT INTO alerts (rule, kind, subject, state, summary, value, channels, opened_at, updated_at, held_at)
			VALUES (?1, ?2, ?3, 'open', ?4, ?5, ?6, ?7, ?7, ?7) ON CONFLICT (rule, subject) WHERE state != 'resolved' DO NOTHING`,
			a.Rule, a.Kind, a.Subject, a.Summary, a.Value, strings.Join(a.Channels, ","), millis(at))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			opened = true
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			if untold := a.UntoldOfOpening(); len(untold) > 0 {
				if err := insertNotifications(ctx, tx, id, untold, storage.AlertOpened, a.Summary, a.Value, "", at); err != nil {
					return err
				}
			}
		}
		out, err = scanAlert(tx.QueryRowContext(ctx, `SELECT `+alertColumns+` FROM alerts a
			WHERE a.rule = ? AND a.subject = ? AND a.state != 'resolved'`, a.Rule, a.Subject))
		return err
	})
	if err != nil {
		return storage.Alert{}, false, fmt.Errorf("open alert %s on %q: %w", a.Rule, a.Subject, err)
	}
	return out, opened, nil
}

// HoldAlert records that an evaluation found the condition of an active alert holding at
// time at, and what the rule measured then. It sends nothing: notifications are for
// transitions only. A hold recorded before the clock was set back (further ahead of at
// than storage.ClockSetBackSlack) gives way to at.
func (db *DB) HoldAlert(ctx context.Context, id int64, summary, value string, at time.Time) error {
	_, err := db.writeExec(ctx, `UPDATE alerts SET held_at = CASE WHEN held_at > ?1 + ?5 THEN ?1 ELSE max(held_at, ?1) END,
		summary = ?2, value = ?3, updated_at = CASE WHEN summary != ?2 OR value != ?3 THEN ?1 ELSE updated_at END
		WHERE id = ?4 AND state != 'resolved'`, millis(at), summary, value, id, storage.ClockSetBackSlack.Milliseconds())
	if err != nil {
		return fmt.Errorf("hold alert %d: %w", id, err)
	}
	return nil
}

// AcknowledgeAlert marks an open alert acknowledged by actor, audited in the same
// transaction. Returns ErrNotFound for an unknown alert and ErrAlertState for one that
// is not open.
func (db *DB) AcknowledgeAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error) {
	var out storage.Alert
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		a, err := alertIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if a.State != storage.AlertOpen {
			return storage.ErrAlertState
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alerts SET state = 'acknowledged', acknowledged_by = ?, acknowledged_at = ?, updated_at = ?
			WHERE id = ?`, actor, millis(at), millis(at), id); err != nil {
			return err
		}
		if err := db.insertAudit(ctx, tx, storage.AuditEntry{At: at, Actor: actor, Action: "acknowledge alert",
			Source: a.Subject, Reason: alertLabel(a), PreviousState: a.State}); err != nil {
			return err
		}
		out, err = alertIn(ctx, tx, id)
		return err
	})
	if err != nil {
		return storage.Alert{}, fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	return out, nil
}

// ResolveAlert resolves an active alert, with a notification of it to each of the
// alert's channels, in one transaction. actor "" means it resolved by itself (its
// condition cleared), ResolvedRuleRemoved that its rule was removed; a user's
// resolution is audited in the same transaction. Returns
// ErrNotFound for an unknown alert and ErrAlertState for one already resolved.
func (db *DB) ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error) {
	return db.resolveAlert(ctx, id, actor, at, -1)
}

// ClearAlert resolves an active alert by itself, its condition clear, when no
// evaluation found it holding within clearFor before at; ErrAlertHeld otherwise.
func (db *DB) ClearAlert(ctx context.Context, id int64, clearFor time.Duration, at time.Time) (storage.Alert, error) {
	return db.resolveAlert(ctx, id, "", at, clearFor)
}

// resolveAlert is ResolveAlert, and ClearAlert when clearFor is not negative: then the
// alert must not have been held within it (storage.Alert.HeldWithin).
func (db *DB) resolveAlert(ctx context.Context, id int64, actor string, at time.Time, clearFor time.Duration) (storage.Alert, error) {
	var out storage.Alert
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		a, err := alertIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if !a.Active() {
			return storage.ErrAlertState
		}
		if clearFor >= 0 && a.HeldWithin(clearFor, at) {
			return storage.ErrAlertHeld
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alerts SET state = 'resolved', resolved_by = ?, resolved_at = ?, updated_at = ?
			WHERE id = ?`, actor, millis(at), millis(at), id); err != nil {
			return err
		}
		if err := insertNotifications(ctx, tx, id, a.Channels, storage.AlertResolvedEvent, a.Summary, a.Value, actor, at); err != nil {
			return err
		}
		if actor != "" && actor != storage.ResolvedRuleRemoved {
			if err := db.insertAudit(ctx, tx, storage.AuditEntry{At: at, Actor: actor, Action: "resolve alert",
				Source: a.Subject, Reason: alertLabel(a), PreviousState: a.State}); err != nil {
				return err
			}
		}
		out, err = alertIn(ctx, tx, id)
		return err
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

func alertIn(ctx context.Context, tx *sql.Tx, id int64) (storage.Alert, error) {
	a, err := scanAlert(tx.QueryRowContext(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Alert{}, storage.ErrNotFound
	}
	return a, err
}

func insertNotifications(ctx context.Context, tx *sql.Tx, alert int64, channels []string, event, summary, value, actor string, at time.Time) error {
	for _, c := range channels {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_notifications (alert, channel, event, summary, value, actor, created_at, next_attempt_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, alert, c, event, summary, value, actor, millis(at), millis(at)); err != nil {
			return fmt.Errorf("notification to %s: %w", c, err)
		}
	}
	return nil
}

// channelsIn is the condition that column is one of channels, with its arguments:
// true for nil (any channel), false for none.
func channelsIn(column string, channels []string) (string, []any) {
	if channels == nil {
		return "1", nil
	}
	if len(channels) == 0 {
		return "0", nil
	}
	args := make([]any, len(channels))
	for i, c := range channels {
		args[i] = c
	}
	return column + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(channels)), ", ") + ")", args
}

// GiveUpNotifications gives up the notifications pending to channels other than
// channels that were due before before and that no sender has leased since (see
// storage.Store).
func (db *DB) GiveUpNotifications(ctx context.Context, channels []string, before time.Time) (int64, error) {
	of, ofArgs := channelsIn("channel", channels)
	// Looked for first through a reader, as LeaseNotifications does.
	var waiting int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM alert_notifications
		WHERE state = 'pending' AND next_attempt_at < ? AND NOT `+of+` LIMIT 1)`,
		append([]any{millis(before)}, ofArgs...)...).Scan(&waiting)
	if err != nil || waiting == 0 {
		return 0, err
	}
	res, err := db.writeExec(ctx, `UPDATE alert_notifications SET state = 'failed',
		last_error = 'channel ' || channel || ' is no longer configured'
		WHERE state = 'pending' AND next_attempt_at < ? AND NOT `+of,
		append([]any{millis(before)}, ofArgs...)...)
	if err != nil {
		return 0, fmt.Errorf("give up notifications: %w", err)
	}
	return res.RowsAffected()
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
// leases them until now+lease: another sender skips them until then, and one that dies
// mid-send loses nothing.
func (db *DB) LeaseNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int, channels []string) ([]storage.Notification, error) {
	of, ofArgs := channelsIn("channel", channels)
	ofN, _ := channelsIn("n.channel", channels)
	// Looked for first through a reader: most of the time nothing is due, and a write
	// transaction every few seconds would contend with intake for nothing.
	var due int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM alert_notifications
		WHERE state = 'pending' AND next_attempt_at <= ? AND `+of+` LIMIT 1)`, append([]any{millis(now)}, ofArgs...)...).Scan(&due)
	if err != nil {
		return nil, fmt.Errorf("lease notifications: %w", err)
	}
	if due == 0 {
		return nil, nil
	}
	var out []storage.Notification
	leasedUntil := fromMillis(millis(now.Add(lease)))
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `SELECT n.id, n.channel, n.event, n.summary, n.value, n.actor, n.created_at, n.attempts, `+alertColumns+`
			FROM alert_notifications n JOIN alerts a ON a.id = n.alert
			WHERE n.state = 'pending' AND n.next_attempt_at <= ? AND `+ofN+` AND NOT `+sqlToldEarlierFirst+`
			ORDER BY n.next_attempt_at, n.id LIMIT ?`, append(append([]any{millis(now)}, ofArgs...), limit)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n storage.Notification
			var at int64
			fields := &alertFields{a: &n.Alert}
			if err := rows.Scan(append([]any{&n.ID, &n.Channel, &n.Event, &n.Summary, &n.Value, &n.Actor, &at, &n.Attempts},
				fields.dest()...)...); err != nil {
				rows.Close()
				return err
			}
			fields.finish()
			n.At, n.LeasedUntil = fromMillis(at), leasedUntil
			out = append(out, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, n := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE alert_notifications SET next_attempt_at = ? WHERE id = ?`,
				millis(leasedUntil), n.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease notifications: %w", err)
	}
	return out, nil
}

// FinishNotification records an attempt to send notification n at time at, while n is
// pending under the lease it was given (storage.ErrLeaseLost otherwise).
func (db *DB) FinishNotification(ctx context.Context, n storage.Notification, res storage.NotificationResult, at time.Time) error {
	var q string
	var args []any
	switch {
	case res.Sent:
		q, args = `UPDATE alert_notifications SET state = 'sent', attempts = attempts + 1, sent_at = ?, last_error = ''`,
			[]any{millis(at)}
	case res.Failed:
		q, args = `UPDATE alert_notifications SET state = 'failed', attempts = attempts + 1, last_error = ?`,
			[]any{res.Error}
	case res.Returned:
		q, args = `UPDATE alert_notifications SET next_attempt_at = ?`, []any{millis(res.NextAt)}
	default:
		q, args = `UPDATE alert_notifications SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?`,
			[]any{millis(res.NextAt), res.Error}
	}
	r, err := db.writeExec(ctx, q+` WHERE id = ? AND state = 'pending' AND next_attempt_at = ?`,
		append(args, n.ID, millis(n.LeasedUntil))...)
	if err != nil {
		return fmt.Errorf("finish notification %d: %w", n.ID, err)
	}
	if done, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("finish notification %d: %w", n.ID, err)
	} else if done == 0 {
		return fmt.Errorf("finish notification %d: %w", n.ID, storage.ErrLeaseLost)
	}
	return nil
}

// NotificationCounts returns how many notifications are in each state (pending, sent,
// failed) per channel: channel → state → count.
func (db *DB) NotificationCounts(ctx context.Context) (map[string]map[string]int, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT channel, state, count(*) FROM alert_notifications GROUP BY channel, state`)
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
	return out, rows.Err()
}

// SweepAlerts deletes at most limit alerts resolved before cutoff, with their
// notifications, oldest first, through the index of resolved alerts, and returns how
// many alerts it deleted. An alert with a notification still being retried is kept
// until that is sent or given up on. Active alerts are never deleted: one per rule and
// subject at most, each with one notification per channel, they cannot pile up.
func (db *DB) SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res, err := db.writeExec(ctx, sqlSweepAlerts, millis(cutoff), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep resolved alerts: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep resolved alerts: %w", err)
	}
	return n, nil
}

// sqlSweepAlerts deletes up to ?2 alerts resolved before ?1; their notifications go
// with them (ON DELETE CASCADE, through alert_notifications_alert). The state condition
// is alerts_resolved's, word for word, so that SQLite can use that partial index. The
// alert with the highest id, and the one whose notification has the highest id, are
// kept: SQLite gives a new row the highest id plus one, and a sweep that emptied the
// tables would give the next outage the ids of an earlier one, its notification the
// webhook-id a receiver dropped as a retry of that one.
const sqlSweepAlerts = `DELETE FROM alerts WHERE id IN (
	SELECT id FROM alerts WHERE state = 'resolved' AND resolved_at < ?1
		AND NOT EXISTS (SELECT 1 FROM alert_notifications n WHERE n.alert = alerts.id AND n.state = 'pending')
		AND id != (SELECT max(id) FROM alerts)
		AND id != coalesce((SELECT alert FROM alert_notifications ORDER BY id DESC LIMIT 1), 0)
	ORDER BY resolved_at LIMIT ?2)`

// What the alert rules read.

// MoneyMismatches returns, per source, how many duplicates received since since had an
// amount, currency or status that differs from their first delivery's.
func (db *DB) MoneyMismatches(ctx context.Context, since time.Time) (map[string]int64, error) {
	return db.countBySource(ctx, "money mismatches", `SELECT source, count(*) FROM deliveries INDEXED BY deliveries_money_mismatch_at
		WHERE money_mismatch = 1 AND received_at >= ? GROUP BY source`, millis(since))
}

// OpenSuspects returns, per source, how many suspected doubles wait for a review.
func (db *DB) OpenSuspects(ctx context.Context) (map[string]int64, error) {
	return db.countBySource(ctx, "open suspects", sqlOpenSuspects, storage.CurrencyTable())
}

// SignatureFailures returns, per source, how many deliveries received since since were
// refused with status (401: a bad or missing signature), stored ones and those only
// counted (rejection_counts) together. The counted ones are taken by whole minutes,
// from since's minute on.
func (db *DB) SignatureFailures(ctx context.Context, since time.Time, status int) (map[string]int64, error) {
	stored, err := db.countBySource(ctx, "signature failures", `SELECT source, count(*) FROM deliveries INDEXED BY deliveries_rejected_at
		WHERE outcome = 'rejected' AND received_at >= ? AND status = ? GROUP BY source`, millis(since), status)
	if err != nil {
		return nil, err
	}
	counted, err := db.countBySource(ctx, "signature failures", `SELECT source, sum(rejections) FROM rejection_counts
		WHERE minute >= ? AND status = ? GROUP BY source`, millis(since)/minuteMillis, status)
	if err != nil {
		return nil, err
	}
	for s, n := range counted {
		stored[s] += n
	}
	return stored, nil
}

// FailingStreaks returns, for each source in sources, how many of its latest dispatch
// attempts failed in a row, counting at most limit.
func (db *DB) FailingStreaks(ctx context.Context, sources []string, limit int) (map[string]int, error) {
	out := map[string]int{}
	for _, s := range sources {
		rows, err := db.read.QueryContext(ctx, `SELECT error FROM attempts INDEXED BY attempts_source_id
			WHERE source = ? AND error != ? ORDER BY id DESC LIMIT ?`, s, storage.AttemptInterrupted, limit)
		if err != nil {
			return nil, fmt.Errorf("failing streak of %s: %w", s, err)
		}
		n := 0
		for rows.Next() {
			var e string
			if err := rows.Scan(&e); err != nil {
				rows.Close()
				return nil, fmt.Errorf("failing streak of %s: %w", s, err)
			}
			if e == "" {
				break
			}
			n++
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("failing streak of %s: %w", s, err)
		}
		out[s] = n
	}
	return out, nil
}

func (db *DB) countBySource(ctx context.Context, what, query string, args ...any) (map[string]int64, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
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
	return out, rows.Err()
}
