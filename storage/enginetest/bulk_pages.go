package enginetest

import (
	"context"
	"slices"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestBulkActions_Pages: the actions past a first page are reached page by page, each
// page's last id the next one's before, newest first, every action once, in a state or
// in all of them; and the actions waiting for approval are counted all, not only those
// one page lists, so that an approver told of a page is told of the rest.
func TestBulkActions_Pages(t *testing.T, e Engine) {
	ctx := context.Background()
	db, _, req := fourEyesFixture(t, e)
	var all, pending []int64
	for i := range 7 {
		a, err := db.CreateBulkPreview(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		// Every other action is started, and waits for approval (its money is above the
		// EUR threshold); the rest stay previews.
		if i%2 == 0 {
			if a, err = db.StartBulkAction(ctx, a.ID, "ann", req.Thresholds); err != nil || a.State != storage.BulkPendingApproval {
				t.Fatalf("start: %+v, %v", a, err)
			}
			pending = append(pending, a.ID)
		}
		all = append(all, a.ID)
	}
	slices.Reverse(all)
	slices.Reverse(pending)

	// pages reads every action in state, limit at a time, each page's last id the
	// next page's before.
	pages := func(state string, limit int) []int64 {
		t.Helper()
		var got []int64
		var before int64
		for range 20 {
			acts, err := db.BulkActions(ctx, state, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(acts) > limit {
				t.Fatalf("%d actions asked for, %d answered", limit, len(acts))
			}
			for _, a := range acts {
				if before != 0 && a.ID >= before {
					t.Errorf("state %q before %d: action %d", state, before, a.ID)
				}
				if state != "" && a.State != state {
					t.Errorf("state %q: action %d is %s", state, a.ID, a.State)
				}
				got = append(got, a.ID)
			}
			if len(acts) < limit {
				return got
			}
			before = acts[len(acts)-1].ID
		}
		t.Fatal("the pages never ended")
		return nil
	}
	for _, limit := range []int{1, 2, 3, 7, 10} {
		if got := pages("", limit); !slices.Equal(got, all) {
			t.Errorf("every action, %d a page: %v; want %v", limit, got, all)
		}
		if got := pages(storage.BulkPendingApproval, limit); !slices.Equal(got, pending) {
			t.Errorf("pending, %d a page: %v; want %v", limit, got, pending)
		}
	}
	// A before that is no action's id (one deleted, or past the newest) still cuts.
	if acts, err := db.BulkActions(ctx, "", all[0]+1000, 2); err != nil || len(acts) != 2 || acts[0].ID != all[0] {
		t.Errorf("before past the newest: %v, %v; want the newest two", acts, err)
	}
	if acts, err := db.BulkActions(ctx, "", all[len(all)-1], 5); err != nil || len(acts) != 0 {
		t.Errorf("before the oldest: %d actions, %v; want none", len(acts), err)
	}

	for _, tt := range []struct {
		state string
		want  int
	}{
		{storage.BulkPendingApproval, len(pending)},
		{storage.BulkPreview, len(all) - len(pending)},
		{storage.BulkQueued, 0},
		{"", len(all)},
	} {
		if n, err := db.CountBulkActions(ctx, tt.state); err != nil || n != tt.want {
			t.Errorf("count of %q: %d, %v; want %d", tt.state, n, err, tt.want)
		}
	}
}
