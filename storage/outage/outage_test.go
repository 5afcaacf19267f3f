package outage_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/outage"
)

// TestLog_Note: a loop failing at every round for ten minutes, a round a second, writes
// the first failure and then one line a minute, each with how many went unlogged since
// the last, and one line when it works again.
func TestLog_Note(t *testing.T) {
	var b strings.Builder
	l := outage.New(slog.New(slog.NewTextHandler(&b, nil)), slog.LevelWarn, "round failed", "round works again")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := errors.New("database or disk is full")
	for i := range 600 {
		l.Note(start.Add(time.Duration(i)*time.Second), fail, "table", "claims")
	}
	text := b.String()
	if n := strings.Count(text, `msg="round failed"`); n != 10 {
		t.Errorf("%d failure lines over ten minutes, want 10:\n%s", n, text)
	}
	if !strings.Contains(text, "level=WARN") || !strings.Contains(text, "table=claims") || !strings.Contains(text, "unlogged=59") {
		t.Errorf("a failure line lacks its level, its attributes or the count of those unlogged:\n%s", text)
	}
	b.Reset()
	l.Note(start.Add(600*time.Second), nil)
	l.Note(start.Add(601*time.Second), nil)
	if got := b.String(); strings.Count(got, `msg="round works again"`) != 1 || !strings.Contains(got, "level=INFO") || !strings.Contains(got, "unlogged=59") {
		t.Errorf("after the failures end, want one INFO line with the count unlogged:\n%s", got)
	}
	b.Reset()
	l.Note(start.Add(602*time.Second), fail)
	if !strings.Contains(b.String(), "unlogged=0") {
		t.Errorf("a failure after a recovery is logged at once, with nothing unlogged:\n%s", b.String())
	}
}
