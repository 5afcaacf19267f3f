package receiver_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// uncountable is a database whose count of stuck keys fails while failing is set.
type uncountable struct {
	*sqlite.DB
	failing atomic.Bool
}

func (u *uncountable) StuckCounts(ctx context.Context, before time.Time) (map[string]int, error) {
	if u.failing.Load() {
		return nil, errors.New("count stuck keys: database is locked")
	}
	return u.DB.StuckCounts(ctx, before)
}

// TestDispatch_StuckCountFailureLogged: while the stuck keys cannot be counted,
// hookdedup_stuck_keys keeps its last values, which monitoring would take for current:
// the log says so, once, as every failing loop does, and again when they are counted.
// It said nothing.
func TestDispatch_StuckCountFailureLogged(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	st := &uncountable{DB: db}
	st.failing.Store(true)
	var logs syncBuffer
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	storagetest.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "hookdedup_stuck_keys keeps its last values") {
			return errors.New("no line for the failed count:\n" + logs.String())
		}
		return nil
	})
}
