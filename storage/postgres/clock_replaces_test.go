package postgres

import (
	"testing"
	"time"
)

// TestClock_Replaces: a reading replaces the one in use only when they disagree by
// more than the slack and the reading's own uncertainty (half its round trip): a far
// server's readings, however uncertain, still set right a clock minutes off, and a
// near one's few milliseconds of jitter never move the time back and forth.
func TestClock_Replaces(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cur := &mark{server: at.Add(2 * time.Minute), at: time.Hour}
	later, laterUp := at.Add(time.Minute), time.Hour+time.Minute
	for _, c := range []struct {
		name      string
		cur       *mark
		next      mark
		uncertain time.Duration
		want      bool
	}{
		{"the first reading", nil, mark{server: later, at: laterUp}, time.Second, true},
		{"the same time", cur, mark{server: later.Add(2 * time.Minute), at: laterUp}, 0, false},
		{"jitter", cur, mark{server: later.Add(2*time.Minute + 5*time.Millisecond), at: laterUp}, time.Millisecond, false},
		{"minutes off, near", cur, mark{server: later, at: laterUp}, time.Millisecond, true},
		{"minutes off, 150 ms away", cur, mark{server: later, at: laterUp}, 75 * time.Millisecond, true},
		{"minutes off, seconds away", cur, mark{server: later, at: laterUp}, 3 * time.Second, true},
		{"within a far reading's uncertainty", cur, mark{server: later.Add(2*time.Minute + time.Second), at: laterUp}, 2 * time.Second, false},
		{"behind, past slack", cur, mark{server: later.Add(2*time.Minute - 150*time.Millisecond), at: laterUp}, 10 * time.Millisecond, true},
	} {
		if got := replaces(c.cur, c.next, c.uncertain); got != c.want {
			t.Errorf("%s: replaces = %v, want %v", c.name, got, c.want)
		}
	}
}
