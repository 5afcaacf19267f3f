package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// A bulk reprocess previewed while its keys' source ran, and started or approved once
// the configuration no longer has that source (the server restarted without it), is
// refused with the source named, as a reprocess of one of its keys is: queued, its
// keys would wait in processing for a dispatcher that nothing here starts. A release
// of the same keys still goes ahead.
func TestAPI_BulkReprocessOfSourceNoLongerRun(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	ctx := context.Background()
	storagetest.CreateUser(t, e.db, "second", storage.RoleOperator, consolePassword)
	tokens := map[string]string{}
	for _, name := range []string{"operator", "second"} {
		tok, _, err := e.db.CreateToken(ctx, name, "script", "test")
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok
	}
	preview := func(kind string, f string) string {
		t.Helper()
		code, body := apiPost(t, e.srv.URL+"/api/v1/bulk", tokens["operator"],
			`{"kind":"`+kind+`","reason":"PMS restored","filter":{`+f+`}}`)
		if code != http.StatusCreated {
			t.Fatalf("preview: %d %s", code, body)
		}
		var a struct{ ID string }
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	small := preview("reprocess", `"source":"ota","stuck":true,"currency":"JPY"`) // under the threshold
	big := preview("reprocess", `"stuck":true`)                                   // every source: above it
	release := preview("release", `"source":"ota","stuck":true`)
	if code, body := apiPost(t, e.srv.URL+"/api/v1/bulk/"+big+"/start", tokens["operator"], ``); code != http.StatusOK {
		t.Fatalf("start of the action above the threshold: %d %s", code, body)
	}

	// The server restarted with a configuration without ota.
	s, err := web.New(ctx, web.Config{Store: e.db, Static: static.FS, Now: e.clock.Now, BcryptCost: bcrypt.MinCost,
		ApprovalThreshold: storage.ApprovalThresholds{"EUR": "500.00"},
		Sources:           []web.Source{{Name: "pms", Scheme: "token", EventID: "/event_id", ForwardURL: "http://127.0.0.1:9/events"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	step := func(id, step, who string) (int, string) {
		body := `{"reason":"checked with finance"}`
		if step == "start" {
			body = "" // a start takes no reason
		}
		return apiPost(t, srv.URL+"/api/v1/bulk/"+id+"/"+step, tokens[who], body)
	}

	if code, body := step(small, "start", "operator"); code != http.StatusConflict || !strings.Contains(body, `source \"ota\" is not in this server's configuration`) {
		t.Errorf("start of a reprocess of a source no longer run: %d %s; want 409 naming the source", code, body)
	}
	if a := bulkState(t, e, mustID(t, small)); a.State != storage.BulkPreview {
		t.Errorf("after the refused start: %s; want preview", a.State)
	}
	if code, body := step(big, "approve", "second"); code != http.StatusConflict || !strings.Contains(body, `source \"ota\" is not in this server's configuration`) {
		t.Errorf("approval of a reprocess of a source no longer run: %d %s; want 409 naming the source", code, body)
	}
	if a := bulkState(t, e, mustID(t, big)); a.State != storage.BulkPendingApproval {
		t.Errorf("after the refused approval: %s; want pending_approval", a.State)
	}
	if code, body := step(big, "refuse", "second"); code != http.StatusOK {
		t.Errorf("refusal: %d %s", code, body)
	}
	if code, body := step(release, "start", "operator"); code != http.StatusOK {
		t.Errorf("start of a release of a source no longer run: %d %s", code, body)
	}
}

func mustID(t *testing.T, id string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(id, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
