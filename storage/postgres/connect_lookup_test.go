package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/postgres"
)

// TestOpen_HostLookupWithinConnectTimeout: a DNS server that never answers fails the
// start within the URL's connect_timeout, as a server that never answers does, naming
// the host; it does not hold the start for as long as the resolver waits.
func TestOpen_HostLookupWithinConnectTimeout(t *testing.T) {
	postgres.SetLookupHost(t, func(ctx context.Context, host string) ([]string, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Second): // a resolver that gives up by itself, much later
			return []string{"127.0.0.1"}, nil
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	start := time.Now()
	db, err := postgres.Open(ctx, "postgres://hook:s3cret@db.unanswered.example:5432/hook?connect_timeout=1", postgres.Options{})
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Open took %s to fail, want about the connect_timeout of 1s: %v", took.Round(time.Millisecond), err)
	}
	if msg := err.Error(); !strings.Contains(msg, "db.unanswered.example") || !strings.Contains(msg, "connect timeout") {
		t.Errorf("error %q does not say that the host's look-up went unanswered", msg)
	}
}
