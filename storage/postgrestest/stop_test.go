package postgrestest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestStop: Stop ends the cluster at once; a test whose database outlived it ends
// without trouble, and the next NewDatabase starts another cluster, its template set up
// again.
func TestStop(t *testing.T) {
	t.Run("outlived", func(t *testing.T) {
		url := postgrestest.NewDatabase(t)
		if err := postgrestest.Stop(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			conn.Close(ctx)
			t.Fatal("connected to a database of the stopped cluster")
		}
	}) // its database's cleanup runs here, after the stop
	pool := mustPool(t, 1)
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM claims").Scan(&n); err != nil {
		t.Fatalf("the cluster started after Stop: %v", err)
	}
}
