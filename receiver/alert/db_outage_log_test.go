package alert_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRun_DatabaseOutageLoggedOnce: while the database cannot be read (here its alert
// tables are out of reach), every evaluation of the rules and every lease of the
// notifications due fails alike, at every interval for as long as that lasts. Each is
// logged once, then at most once a minute, and once when it works again.
func TestRun_DatabaseOutageLoggedOnce(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "stuck", Kind: alert.KindStuckKeys, Threshold: 1, For: 5 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) { c.Interval = 10 * time.Millisecond })
	execSQL(t, f.db, `ALTER TABLE alerts RENAME TO alerts_away`)
	execSQL(t, f.db, `ALTER TABLE alert_notifications RENAME TO alert_notifications_away`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(500 * time.Millisecond) // fifty intervals, all failing
	for _, msg := range []string{`msg="evaluating alert rules"`, `msg="leasing alert notifications"`} {
		if n := strings.Count(f.logs.String(), msg); n != 1 {
			t.Errorf("%d lines %s in half a second of failures, want 1:\n%s", n, msg, f.logs.String())
		}
	}
	if n := strings.Count(f.logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings in half a second of failures, want 2:\n%s", n, f.logs.String())
	}
	execSQL(t, f.db, `ALTER TABLE alerts_away RENAME TO alerts`)
	execSQL(t, f.db, `ALTER TABLE alert_notifications_away RENAME TO alert_notifications`)
	storagetest.Eventually(t, 10*time.Second, func() error {
		for _, msg := range []string{`msg="alert rules evaluated again"`, `msg="alert notifications leased again"`} {
			if !strings.Contains(f.logs.String(), msg) {
				return fmt.Errorf("no line %s:\n%s", msg, f.logs.String())
			}
		}
		return nil
	})
}
