-- Alerts: what the alert rules found, and the notifications their changes send.

-- One row per alert: a rule's condition on one subject (a source, or '' for a
-- condition of the whole server) from when it opened until it was resolved. At most
-- one alert of a rule and subject is active (open or acknowledged) at a time; once
-- resolved, the condition holding again opens a new one.
CREATE TABLE alerts (
    id              INTEGER PRIMARY KEY,
    rule            TEXT    NOT NULL,            -- the [[alert]] rule's name
    kind            TEXT    NOT NULL,            -- stuck_keys | money_mismatch | ...
    subject         TEXT    NOT NULL DEFAULT '', -- the source it is about; '' for the whole server
    state           TEXT    NOT NULL,            -- open | acknowledged | resolved
    summary         TEXT    NOT NULL DEFAULT '', -- in words, as last evaluated
    value           TEXT    NOT NULL DEFAULT '', -- the measured value, as last evaluated
    channels        TEXT    NOT NULL DEFAULT '', -- the rule's channels when it opened, comma-separated
    opened_at       INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,            -- when value or state last changed
    acknowledged_by TEXT    NOT NULL DEFAULT '',
    acknowledged_at INTEGER NOT NULL DEFAULT 0,
    resolved_by     TEXT    NOT NULL DEFAULT '', -- the user; '' when it resolved by itself
    resolved_at     INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX alerts_active ON alerts (rule, subject) WHERE state != 'resolved';
CREATE INDEX alerts_resolved ON alerts (resolved_at) WHERE state = 'resolved';

-- The outbox: one row per notification of a transition to one channel, written in the
-- transaction of the transition, sent (and retried with backoff) by the alert engine,
-- so that a notification survives a restart and a channel that is down for a while.
CREATE TABLE alert_notifications (
    id              INTEGER PRIMARY KEY,
    alert           INTEGER NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    channel         TEXT    NOT NULL,
    event           TEXT    NOT NULL,            -- opened | resolved
    summary         TEXT    NOT NULL DEFAULT '', -- the alert's, at the transition
    value           TEXT    NOT NULL DEFAULT '',
    actor           TEXT    NOT NULL DEFAULT '', -- who made the transition; '' for the engine
    created_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'pending', -- pending | sent | failed
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    sent_at         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX alert_notifications_due ON alert_notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX alert_notifications_alert ON alert_notifications (alert);

-- What the rules read every few seconds, without a walk through every delivery or
-- attempt. Rejected deliveries and money mismatches are few (unauthenticated
-- rejections are sampled), so these partial indexes cost intake little.
CREATE INDEX deliveries_rejected_at ON deliveries (received_at) WHERE outcome = 'rejected';
CREATE INDEX deliveries_money_mismatch_at ON deliveries (received_at) WHERE money_mismatch = 1;
-- The latest attempts of one source: a downstream failing K times in a row.
CREATE INDEX attempts_source_id ON attempts (source, id);
