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
)

// An action waiting for approval whose requester is no longer an operator (made a
// viewer, or removed) cannot be approved: it would run under the name of someone who may
// no longer reprocess, with a second operator's approval of a request nobody current
// stands behind. It can still be refused, which closes it.
func TestConsole_BulkApprovalNeedsACurrentRequester(t *testing.T) {
	for _, change := range []string{"demoted", "removed"} {
		t.Run(change, func(t *testing.T) {
			e := newConsoleEnv(t, withThreshold)
			refundKeys(t, e)
			ctx := context.Background()
			storagetest.CreateUser(t, e.db, "requester", storage.RoleOperator, consolePassword)
			requester := e.client(t).login("requester")
			_, _, h := requester.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "state": {"stuck"},
				"status": {"refunded"}, "reason": {"refund run failed at the PMS"}})
			where := h.Get("Location")
			var id int64
			if _, err := fmt.Sscanf(where, "/bulk/%d", &id); err != nil {
				t.Fatalf("preview: %q", where)
			}
			requester.post(where+"/start", nil)
			if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval {
				t.Fatalf("started: %s; want pending_approval", a.State)
			}
			var err error
			if change == "demoted" {
				_, err = e.db.SetUserRole(ctx, "requester", storage.RoleViewer, "admin")
			} else {
				err = e.db.DeleteUser(ctx, "requester", "admin")
			}
			if err != nil {
				t.Fatal(err)
			}

			op := e.as(t, storage.RoleOperator)
			op.page(where)
			op.post(where+"/approve", url.Values{"reason": {"looks fine"}})
			if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval || a.DecidedBy != "" {
				t.Fatalf("approved although its requester was %s: %+v", change, a)
			}
			_, page := op.page(where)
			if !strings.Contains(page.text(), "requester is no longer an operator") {
				t.Errorf("the page does not say why the approval was refused:\n%.2000s", page.text())
			}
			tok, _, err := e.db.CreateToken(ctx, storage.RoleOperator, "script", "test")
			if err != nil {
				t.Fatal(err)
			}
			if code, body := apiPost(t, e.srv.URL+"/api/v1/bulk/"+fmt.Sprint(id)+"/approve", tok, `{"reason":"via the API"}`); code != http.StatusConflict ||
				!strings.Contains(body, "no longer an operator") {
				t.Errorf("approval through the API: %d %s; want 409 saying the requester is no longer an operator", code, body)
			}
			op.post(where+"/refuse", url.Values{"reason": {"asked again by a current operator"}})
			if a := bulkState(t, e, id); a.State != storage.BulkRefused {
				t.Errorf("refused: %s; want refused", a.State)
			}
		})
	}
}
