// Package outage bounds what serve's background loops write to the log while the
// database cannot store or cannot be reached (a full disk, PostgreSQL down). Such a
// loop fails alike at every round, every few seconds for as long as the outage lasts,
// and its cause is in the log once already: a line each round buried everything else
// and, on a full disk, filled what little room was left.
//
// It sits beneath storage because loops of every layer need the one rule: the engines'
// (the SQLite checkpointer, the PostgreSQL clock), storage's (the bulk-action runner),
// the receiver's (sweeps, dispatch, alerts) and serve's own (roll-ups, the schema
// check); storage and its engines may import nothing above them.
package outage

import (
	"context"
	"log/slog"
	"time"
)

// Every bounds how often a loop that keeps failing is logged.
const Every = time.Minute

// Log tells of the failures of one background loop: the first one, then at most one
// every Every with how many went unlogged (attribute "unlogged"), and one line at level
// INFO when a round works again, so that the log shows when the outage ended for it.
// The zero value is not usable: New makes one. A Log is not safe for concurrent use;
// each loop keeps its own.
type Log struct {
	log           *slog.Logger
	level         slog.Level
	failed, again string
	failing       bool
	logged        time.Time
	unlogged      int
}

// New returns a Log that writes to log: failed, at level, for the failures Note logs
// (with their error), and again, at level INFO, at the first round that works after
// failures.
func New(log *slog.Logger, level slog.Level, failed, again string) *Log {
	return &Log{log: log, level: level, failed: failed, again: again}
}

// Note notes the outcome of a round that ended at now with err (nil when it worked),
// logging it as Log says, and reports whether it wrote a line. attrs are added to a
// failure's line (which table, which action).
func (l *Log) Note(now time.Time, err error, attrs ...any) bool {
	if err == nil {
		if !l.failing {
			return false
		}
		l.log.Info(l.again, "unlogged", l.unlogged)
		l.failing, l.unlogged = false, 0
		return true
	}
	if l.failing && now.Sub(l.logged) < Every {
		l.unlogged++
		return false
	}
	l.log.Log(context.Background(), l.level, l.failed, append(append([]any{}, attrs...), "err", err, "unlogged", l.unlogged)...)
	l.failing, l.logged, l.unlogged = true, now, 0
	return true
}
