package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestReadOnly: a standby, a read-only transaction and a full disk refuse a write
// that is not stored and may pass later: writeTx answers them ErrWriteTimeout (503 in
// the console and the API); a constraint is no such refusal.
func TestReadOnly(t *testing.T) {
	for code, want := range map[string]bool{"25006": true, "53100": true, "23505": false, "40001": false} {
		if got := readOnly(fmt.Errorf("commit: %w", &pgconn.PgError{Code: code})); got != want {
			t.Errorf("SQLSTATE %s: readOnly %v, want %v", code, got, want)
		}
	}
}
