package storagetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and stops the
// goroutine, as the real one does, without failing the test that uses it.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// run calls Eventually on a fatalRecorder and returns the message it failed with, if any.
func run(timeout time.Duration, cond func() error) (msg string) {
	f := &fatalRecorder{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.msg
	}()
	storagetest.Eventually(f, timeout, cond)
	return ""
}

func TestEventually(t *testing.T) {
	t.Run("ReturnsOnceTheConditionHolds", func(t *testing.T) {
		calls := 0
		msg := run(time.Minute, func() error {
			calls++
			if calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		if msg != "" || calls != 3 {
			t.Fatalf("failed with %q after %d calls, want a return after 3", msg, calls)
		}
	})
	t.Run("FailsWithTheLastErrorAtTheDeadline", func(t *testing.T) {
		calls := 0
		msg := run(50*time.Millisecond, func() error {
			calls++
			return fmt.Errorf("still %d", calls)
		})
		if calls < 2 || !strings.Contains(msg, fmt.Sprintf("still %d", calls)) || !strings.Contains(msg, "50ms") {
			t.Fatalf("failed with %q after %d calls, want the last error and the timeout", msg, calls)
		}
	})
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c := storagetest.NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Add(90 * time.Second)
	if got := c.Now(); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("after Add(90s) Now = %v", got)
	}
}

func TestAgeSessions(t *testing.T) {
	db := storagetest.Open(t)
	ctx := context.Background()
	u := storagetest.CreateUser(t, db, "ana", storage.RoleViewer, "correct horse battery")
	start := time.Now().Truncate(time.Millisecond)
	id, err := db.CreateSession(ctx, u, start)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.AgeSessions(t, db, 31*time.Minute)
	s, err := db.SessionByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !s.SeenAt.Equal(start.Add(-31*time.Minute)) || !s.CreatedAt.Equal(start) {
		t.Fatalf("session seen %v, created %v; want seen 31m before %v and created then", s.SeenAt, s.CreatedAt, start)
	}
}
