package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// decidedMeanwhile is the console's store with change run on the decider as each
// approval or refusal of a bulk action reaches it: after the console or the API let
// them in as an operator, before the decision's own transaction.
type decidedMeanwhile struct {
	web.Store
	change func(actor string)
}

func (s *decidedMeanwhile) ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.ApproveBulkAction(ctx, id, actor, reason)
}

func (s *decidedMeanwhile) RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.RefuseBulkAction(ctx, id, actor, reason)
}

// An operator made a viewer, or removed, between the console's or the API's check of
// their role and their approval or refusal of an action is told why nothing happened,
// in words, on the answer to the decision itself: the change that refused it ended
// their console session too, so a flash for the next page would be lost with it. The
// action still waits, and no audit row says it was decided.
func TestBulkDecisionByApproverGoneMeanwhile(t *testing.T) {
	for _, step := range []string{"approve", "refuse"} {
		for _, change := range []string{"demoted", "removed"} {
			t.Run(step+"/"+change, func(t *testing.T) {
				ctx := context.Background()
				store := &decidedMeanwhile{}
				e := newConsoleEnv(t, withThreshold, func(c *web.Config) { store.Store, c.Store = c.Store, store })
				store.change = func(actor string) {
					var err error
					if change == "demoted" {
						_, err = e.db.SetUserRole(ctx, actor, storage.RoleViewer, "admin")
					} else {
						err = e.db.DeleteUser(ctx, actor, "admin")
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				want := map[string]string{"demoted": "you are a viewer now", "removed": "was removed"}[change]
				refundKeys(t, e)
				op := e.as(t, storage.RoleOperator)
				_, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "state": {"stuck"},
					"status": {"refunded"}, "reason": {"refund run failed at the PMS"}})
				where := h.Get("Location")
				var id int64
				if _, err := fmt.Sscanf(where, "/bulk/%d", &id); err != nil {
					t.Fatalf("preview: %q", where)
				}
				op.post(where+"/start", nil)
				if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval {
					t.Fatalf("started: %s; want pending_approval", a.State)
				}
				undecided := func(how string) {
					t.Helper()
					if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval || a.DecidedBy != "" {
						t.Errorf("%s: %+v; want it still waiting, undecided", how, a)
					}
					log, err := e.db.AuditLog(ctx, 0, 100)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range log {
						if row.Action == "bulk "+step {
							t.Errorf("%s: audit row %+v", how, row)
						}
					}
				}

				storagetest.CreateUser(t, e.db, "dee", storage.RoleOperator, consolePassword)
				dee := e.client(t).login("dee")
				dee.page(where)
				code, body, _ := dee.post(where+"/"+step, url.Values{"reason": {"looks fine"}})
				text := parsePage(t, body).text()
				if code != http.StatusForbidden || !strings.Contains(text, "can no longer approve or refuse") || !strings.Contains(text, want) {
					t.Errorf("%s in the console: %d\n%.2000s\nwant 403 saying you can no longer approve or refuse, %s", step, code, text, want)
				}
				undecided("console")

				storagetest.CreateUser(t, e.db, "scripted", storage.RoleOperator, consolePassword)
				tok, _, err := e.db.CreateToken(ctx, "scripted", "script", "test")
				if err != nil {
					t.Fatal(err)
				}
				want = map[string]string{"demoted": "scripted is a viewer now", "removed": "scripted was removed"}[change]
				code, body = apiPost(t, e.srv.URL+"/api/v1/bulk/"+fmt.Sprint(id)+"/"+step, tok, `{"reason":"via the API"}`)
				if code != http.StatusForbidden || !strings.Contains(body, "can no longer approve or refuse") || !strings.Contains(body, want) {
					t.Errorf("%s through the API: %d %s; want 403 saying it can no longer approve or refuse, %s", step, code, body, want)
				}
				undecided("API")
			})
		}
	}
}
