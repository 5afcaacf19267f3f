package receiver_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// alertSweepWatch is the real database, telling when a sweep of alerts found nothing
// more to delete.
type alertSweepWatch struct {
	*sqlite.DB
	swept chan struct{}
}

func (s alertSweepWatch) SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	n, err := s.DB.SweepAlerts(ctx, cutoff, limit)
	if n < int64(limit) || err != nil {
		select {
		case s.swept <- struct{}{}:
		default:
		}
	}
	return n, err
}

// TestSweeps_ResolvedAlerts: the background sweeps delete alerts resolved longer ago
// than the retention, with their notifications, in batches, and keep the active ones.
func TestSweeps_ResolvedAlerts(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 5 {
		a, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "disk", Kind: "disk_space", Channels: []string{"ops"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ResolveAlert(ctx, a.ID, "", now.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// Each alert's opened, then its resolved, which waits for it, and the next alert's
	// opened waits for that: one at a time, ten in all.
	for round := 0; ; round++ {
		at := now.Add(time.Hour + time.Duration(round)*time.Second)
		ns, err := db.LeaseNotifications(ctx, at, time.Minute, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) == 0 {
			break
		}
		if round == 10 {
			t.Fatalf("notifications still due after ten rounds: %+v", ns)
		}
		for _, n := range ns {
			if err := db.FinishNotification(ctx, n, storage.NotificationResult{Sent: true}, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	active, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "disk", Kind: "disk_space", Channels: []string{"ops"}}, now)
	if err != nil {
		t.Fatal(err)
	}

	sweepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := alertSweepWatch{DB: db, swept: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		receiver.RunSweeps(sweepCtx, w, receiver.SweepConfig{Every: time.Hour, Retention: 24 * time.Hour, Batch: 2,
			Now: func() time.Time { return now.Add(48 * time.Hour) }}, receiver.NewMetrics(nil), slog.New(slog.DiscardHandler))
		close(done)
	}()
	select {
	case <-w.swept:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep of alerts did not finish within 10 s")
	}
	cancel()
	<-done

	as, err := db.Alerts(ctx, storage.AlertFilter{State: "all"})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].ID != active.ID {
		t.Fatalf("alerts left %+v, want the active one only", as)
	}
	counts, err := db.NotificationCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := counts["ops"]; c["sent"] != 0 || c["pending"] != 1 {
		t.Errorf("notifications left %v, want the active alert's opening only", counts)
	}
}
