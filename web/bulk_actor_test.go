package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// changedMeanwhile is the console's store with change run on the actor as each start,
// approval, refusal or cancellation of a bulk action reaches it: after the console or
// the API let them in as an operator, before the step's own transaction.
type changedMeanwhile struct {
	web.Store
	change func(actor string)
}

func (s *changedMeanwhile) StartBulkAction(ctx context.Context, id int64, actor string, t storage.ApprovalThresholds) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.StartBulkAction(ctx, id, actor, t)
}

func (s *changedMeanwhile) ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.ApproveBulkAction(ctx, id, actor, reason)
}

func (s *changedMeanwhile) RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.RefuseBulkAction(ctx, id, actor, reason)
}

func (s *changedMeanwhile) CancelBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	s.change(actor)
	return s.Store.CancelBulkAction(ctx, id, actor, reason)
}

// An operator made a viewer, or removed, between the console's or the API's check of
// their role and their start, approval, refusal or cancellation of an action is told
// what they can no longer do, why, and that nothing happened, in words, on the answer
// to the step itself: the change that refused it ended their console session too, so a
// flash for the next page would be lost with it. The action is as it was, and no audit
// row says the step was taken.
func TestBulkStepByActorGoneMeanwhile(t *testing.T) {
	for _, s := range []struct{ step, verb string }{
		{"start", "start"}, {"approve", "approve or refuse"}, {"refuse", "approve or refuse"}, {"cancel", "cancel"},
	} {
		for _, change := range []string{"demoted", "removed"} {
			t.Run(s.step+"/"+change, func(t *testing.T) {
				ctx := context.Background()
				store := &changedMeanwhile{}
				e := newConsoleEnv(t, withThreshold, func(c *web.Config) { store.Store, c.Store = c.Store, store })
				store.change = func(actor string) {
					if actor != "dee" && actor != "scripted" {
						return // the operator who sets the action up
					}
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
				refundKeys(t, e)
				// An action waiting for approval, for the steps but a start, which only
				// the preview's own operator takes.
				op := e.as(t, storage.RoleOperator)
				_, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "state": {"stuck"},
					"status": {"refunded"}, "reason": {"refund run failed at the PMS"}})
				var pending int64
				if _, err := fmt.Sscanf(h.Get("Location"), "/bulk/%d", &pending); err != nil {
					t.Fatalf("preview: %q", h.Get("Location"))
				}
				op.post(fmt.Sprintf("/bulk/%d/start", pending), nil)
				if a := bulkState(t, e, pending); a.State != storage.BulkPendingApproval {
					t.Fatalf("started: %s; want pending_approval", a.State)
				}
				// taken says whether the step was taken on action id, as it stood before:
				// changed, or audited as name's.
				taken := func(how, name string, id int64, before storage.BulkAction) {
					t.Helper()
					if a := bulkState(t, e, id); !reflect.DeepEqual(a, before) {
						t.Errorf("%s: %+v; want it unchanged: %+v", how, a, before)
					}
					log, err := e.db.AuditLog(ctx, 0, 100)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range log {
						if row.Action == "bulk "+s.step && row.Actor == name {
							t.Errorf("%s: audit row %+v", how, row)
						}
					}
				}

				storagetest.CreateUser(t, e.db, "dee", storage.RoleOperator, consolePassword)
				dee := e.client(t).login("dee")
				id := pending
				if s.step == "start" {
					// A release: started, it would run at once, with no one's approval.
					_, _, h := dee.post("/bulk", url.Values{"kind": {"release"}, "source": {"ota"}, "state": {"stuck"},
						"reason": {"outage"}})
					if _, err := fmt.Sscanf(h.Get("Location"), "/bulk/%d", &id); err != nil {
						t.Fatalf("preview: %q", h.Get("Location"))
					}
				}
				where := fmt.Sprintf("/bulk/%d", id)
				dee.page(where)
				before := bulkState(t, e, id)
				code, body, _ := dee.post(where+"/"+s.step, url.Values{"reason": {"looks fine"}})
				text := parsePage(t, body).text()
				says := []string{"can no longer " + s.verb + " actions",
					map[string]string{"demoted": "you are a viewer now", "removed": "was removed"}[change], "Nothing was changed"}
				for _, want := range says {
					if code != http.StatusForbidden || !strings.Contains(text, want) {
						t.Errorf("%s in the console: %d\n%.2000s\nwant 403 saying %q", s.step, code, text, want)
					}
				}
				taken("console", "dee", id, before)

				storagetest.CreateUser(t, e.db, "scripted", storage.RoleOperator, consolePassword)
				tok, _, err := e.db.CreateToken(ctx, "scripted", "script", "test")
				if err != nil {
					t.Fatal(err)
				}
				id, send := pending, `{"reason":"via the API"}`
				if s.step == "start" {
					code, body := apiPost(t, e.srv.URL+"/api/v1/bulk", tok, `{"kind":"release","reason":"outage","filter":{"source":"ota","stuck":true}}`)
					var out struct{ ID string }
					if err := json.Unmarshal([]byte(body), &out); code != http.StatusCreated || err != nil {
						t.Fatalf("preview through the API: %d %s", code, body)
					}
					if _, err := fmt.Sscan(out.ID, &id); err != nil {
						t.Fatalf("preview through the API: %s", body)
					}
					send = `{}`
				}
				before = bulkState(t, e, id)
				code, body = apiPost(t, fmt.Sprintf("%s/api/v1/bulk/%d/%s", e.srv.URL, id, s.step), tok, send)
				says = []string{"can no longer " + s.verb + " actions",
					map[string]string{"demoted": "scripted is a viewer now", "removed": "scripted was removed"}[change], "nothing was changed"}
				for _, want := range says {
					if code != http.StatusForbidden || !strings.Contains(body, want) {
						t.Errorf("%s through the API: %d %s; want 403 saying %q", s.step, code, body, want)
					}
				}
				taken("API", "scripted", id, before)
			})
		}
	}
}
