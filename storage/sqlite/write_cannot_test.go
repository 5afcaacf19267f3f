package sqlite

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/hookdedup/hookdedup/storage"
)

// TestBusyAsTimeout: a write refused for a full disk or a read-only database, as for a
// lock held past the wait, wraps ErrWriteTimeout, which the console and the API answer
// 503 with Retry-After (nothing was stored; retry later), not 500; any other error is
// left as it is.
func TestBusyAsTimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		timeout bool
	}{
		{"busy", sqlite3.Error{Code: sqlite3.ErrBusy}, true},
		{"full", sqlite3.Error{Code: sqlite3.ErrFull}, true},
		{"read-only", sqlite3.Error{Code: sqlite3.ErrReadonly}, true},
		{"ENOSPC", sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.ENOSPC}, true},
		{"constraint", sqlite3.Error{Code: sqlite3.ErrConstraint}, false},
		{"other", errors.New("no such table"), false},
	} {
		err := busyAsTimeout(fmt.Errorf("commit: %w", c.err))
		if got := errors.Is(err, storage.ErrWriteTimeout); got != c.timeout {
			t.Errorf("%s: %v wraps ErrWriteTimeout: %v, want %v", c.name, err, got, c.timeout)
		}
		// A refusal says what it is: not a lock that outlasted the busy timeout.
		if refused := c.timeout && c.name != "busy"; refused != errors.Is(err, storage.ErrCannotStore) ||
			refused && strings.Contains(err.Error(), "busy timeout") {
			t.Errorf("%s: %v; want ErrCannotStore %v, and no busy timeout named", c.name, err, refused)
		}
	}
}
