package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_BulkListMore: GET /api/v1/bulk answers the newest actions, as many as it
// lists at most, and says with more that there are older ones; a script reading the
// list as every action would otherwise miss those without a word.
func TestAPI_BulkListMore(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	const listed = 200
	for i := range listed + 1 {
		if _, err := e.db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Reason: "check",
			Actor: "operator-user", Filter: storage.BulkFilter{Source: "ota", Key: "k" + strings.Repeat("x", i%3)},
			StuckBefore: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		path     string
		n        int
		wantMore bool
	}{
		{"/api/v1/bulk", listed, true},
		{"/api/v1/bulk?state=preview", listed, true},
		{"/api/v1/bulk?state=done", 0, false},
	} {
		code, out := e.call(t, "viewer", "GET", tt.path, "")
		acts, _ := out["actions"].([]any)
		more, _ := out["more"].(bool)
		if code != 200 || len(acts) != tt.n || more != tt.wantMore {
			t.Errorf("%s: %d, %d actions, more %v; want %d actions, more %v", tt.path, code, len(acts), more, tt.n, tt.wantMore)
		}
	}
}
