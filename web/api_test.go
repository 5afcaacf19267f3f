package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// apiEnv is the console's server on a real database, with one token per role.
type apiEnv struct {
	db     *sqlite.DB
	srv    *httptest.Server
	tokens map[string]string // role -> bearer token
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	ctx := context.Background()
	db := storagetest.Open(t)
	s, err := web.New(ctx, web.Config{Store: db, Static: static.FS, Sources: []web.Source{{Name: "ota", Scheme: "standard-webhooks"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &apiEnv{db: db, srv: srv, tokens: map[string]string{}}
	for _, role := range []string{storage.RoleViewer, storage.RoleOperator, storage.RoleAdmin} {
		if _, err := db.CreateUser(ctx, storage.User{Name: role + "-user", Role: role, PasswordHash: "x"}, "test"); err != nil {
			t.Fatal(err)
		}
		tok, _, err := db.CreateToken(ctx, role+"-user", "test", "test")
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[role] = tok
	}
	return e
}

func (e *apiEnv) record(t *testing.T, key, body string, dispatch bool) *storage.Delivery {
	t.Helper()
	d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "derived", PayloadHash: body,
		KeyCanonical: `{"/booking_id":"BK-1","/status":"cancelled"}`, ContentType: "application/json",
		Booking: "BK-1", EventStatus: "cancelled", Body: []byte(body)}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour, Dispatch: dispatch}); err != nil {
		t.Fatal(err)
	}
	return d
}

// call makes an API request as role ("" = no token) and decodes the JSON answer.
func (e *apiEnv) call(t *testing.T, role, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+e.tokens[role])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, raw)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

// delivery reads delivery id through the API as a viewer and returns the answer as
// sent, failing the test unless it is a 200.
func (e *apiEnv) delivery(t *testing.T, id int64) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/deliveries/"+idStr(id), nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens[storage.RoleViewer])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET delivery %d: %d %.200s", id, resp.StatusCode, raw)
	}
	return raw
}

func TestAPI_Auth(t *testing.T) {
	e := newAPIEnv(t)
	code, out := e.call(t, "", "GET", "/api/v1/deliveries", "")
	if code != 401 || !strings.Contains(out["error"].(string), "bearer token") {
		t.Fatalf("no token: %d %v", code, out)
	}
	for _, route := range []string{"GET /api/v1/deliveries", "GET /api/v1/deliveries/1", "GET /api/v1/keys",
		"GET /api/v1/key?source=ota&key=k", "POST /api/v1/release", "GET /api/v1/unknown"} {
		method, path, _ := strings.Cut(route, " ")
		if code, out := e.call(t, "", method, path, `{"source":"ota","key":"k","reason":"r"}`); code != 401 || out["error"] == nil {
			t.Errorf("%s without a token: %d %v, want 401", route, code, out)
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/keys", nil)
	req.Header.Set("Authorization", "Bearer hdk_forged")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("forged token: %d %v", resp.StatusCode, resp.Header)
	}
	// The console's session cookie is no way into the API.
	req, _ = http.NewRequest("GET", e.srv.URL+"/api/v1/keys", nil)
	req.AddCookie(&http.Cookie{Name: "hookdedup", Value: "x"})
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("cookie only: %d", resp.StatusCode)
	}
	if code, _ := e.call(t, storage.RoleViewer, "GET", "/api/v1/nothing", ""); code != 404 {
		t.Fatalf("unknown endpoint: %d", code)
	}
}

func TestAPI_DeliveriesAndKeys(t *testing.T) {
	e := newAPIEnv(t)
	first := e.record(t, "k1", `{"booking_id":"BK-1","refund":{"amount":10}}`, false)
	dup := e.record(t, "k1", `{"booking_id":"BK-1","refund":{"amount":20}}`, false)
	e.record(t, "k2", `{"booking_id":"BK-2"}`, false)

	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?outcome=duplicate", "")
	list, _ := out["deliveries"].([]any)
	if code != 200 || len(list) != 1 {
		t.Fatalf("duplicates: %d %v", code, out)
	}
	d0 := list[0].(map[string]any)
	if d0["mismatch"] != true || d0["first_delivery"] != idStr(first.ID) || d0["key"] != "k1" {
		t.Fatalf("duplicate = %v", d0)
	}
	if code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?outcome=maybe", ""); code != 400 || !strings.Contains(out["error"].(string), "outcome") {
		t.Fatalf("bad outcome: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries/"+idStr(dup.ID), "")
	if code != 200 {
		t.Fatalf("one delivery: %d %v", code, out)
	}
	der := out["derivation"].(map[string]any)
	if der["method"] != "derived" || der["canonical"] != `{"/booking_id":"BK-1","/status":"cancelled"}` || len(der["sha256"].(string)) != 64 {
		t.Fatalf("derivation = %v", der)
	}
	if same := out["same_key"].([]any); len(same) != 2 {
		t.Fatalf("same key deliveries = %v", same)
	}
	body := out["delivery"].(map[string]any)["body"].(map[string]any)
	if body["refund"].(map[string]any)["amount"] != float64(20) {
		t.Fatalf("body = %v", body)
	}
	if code, _ := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries/99999", ""); code != 404 {
		t.Fatalf("unknown delivery: %d", code)
	}
	code, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/keys?state=processed", "")
	if keys := out["keys"].([]any); code != 200 || len(keys) != 2 {
		t.Fatalf("keys: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/key?source=ota&key=k1", "")
	if code != 200 || out["claim"].(map[string]any)["state"] != "processed" || len(out["deliveries"].([]any)) != 2 {
		t.Fatalf("key: %d %v", code, out)
	}
}

// TestAPI_DeliveryBodyNotUTF8: a stored body that is JSON in shape but holds a byte that
// is not UTF-8 in a string (a Latin-1 "José", stored as intake refused it) comes as
// body_text, made valid UTF-8, so that the answer stays JSON text a strict client reads.
func TestAPI_DeliveryBodyNotUTF8(t *testing.T) {
	e := newAPIEnv(t)
	d := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400, Error: "body: not UTF-8",
		ContentType: "application/json", Body: []byte("{\"guest\":\"Jos\xe9\"}")}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/deliveries/"+idStr(d.ID), nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens[storage.RoleViewer])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET delivery: %d %s", resp.StatusCode, raw)
	}
	if !utf8.Valid(raw) {
		t.Fatalf("the answer is not UTF-8: %q", raw)
	}
	var out struct {
		Delivery struct {
			Body     json.RawMessage `json:"body"`
			BodyText string          `json:"body_text"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.Delivery; got.Body != nil || got.BodyText != "{\"guest\":\"Jos\uFFFD\"}" {
		t.Errorf("body %s, body_text %q; want only body_text, with U+FFFD for the byte", got.Body, got.BodyText)
	}
}

// TestAPI_KeysScanWindow: a keys listing that checks each claim answers a page that may
// be empty but has next, until the key below the window is found.
func TestAPI_KeysScanWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	e := newAPIEnv(t)
	old := e.record(t, "old", `{"booking_id":"BK-1"}`, false)
	bulkKeys(t, e.db, "other", storage.ScanWindow+10)
	var got []string
	path, pages := "/api/v1/keys?source=ota", 0
	for ; path != "" && pages < 5; pages++ {
		code, out := e.call(t, storage.RoleViewer, "GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %v", path, code, out)
		}
		for _, k := range out["keys"].([]any) {
			got = append(got, k.(map[string]any)["key"].(string))
		}
		path = ""
		if next, _ := out["next"].(string); next != "" {
			path = "/api/v1/keys?source=ota&before=" + next
		}
	}
	if pages != 2 || len(got) != 1 || got[0] != old.Key {
		t.Fatalf("%d pages, keys %v; want an empty page with next, then the old key", pages, got)
	}
}

// TestAPI_ManyDeliveriesOfAKey: a key's details list its first KeyDeliveriesShown
// deliveries and say that it has more.
func TestAPI_ManyDeliveriesOfAKey(t *testing.T) {
	e := newAPIEnv(t)
	var last *storage.Delivery
	for i := range web.KeyDeliveriesShown + 1 {
		last = e.record(t, "storm", fmt.Sprintf(`{"n":%d}`, i), false)
	}
	few := e.record(t, "calm", `{"n":1}`, false)
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/key?source=ota&key=storm", "")
	if ds := out["deliveries"].([]any); code != 200 || len(ds) != web.KeyDeliveriesShown || out["more_deliveries"] != true {
		t.Fatalf("key: %d, %d deliveries, more %v", code, len(ds), out["more_deliveries"])
	}
	code, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries/"+idStr(last.ID), "")
	if ds := out["same_key"].([]any); code != 200 || len(ds) != web.KeyDeliveriesShown || out["same_key_more"] != true {
		t.Fatalf("delivery: %d, %d same-key deliveries, more %v", code, len(ds), out["same_key_more"])
	}
	code, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries/"+idStr(few.ID), "")
	if ds := out["same_key"].([]any); code != 200 || len(ds) != 1 || out["same_key_more"] != nil {
		t.Fatalf("one delivery of a key: %d, %d same-key deliveries, more %v", code, len(ds), out["same_key_more"])
	}
}

func TestAPI_Release(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false)
	req := `{"source":"ota","key":"k1","reason":"refund reissued by hand"}`
	if code, out := e.call(t, storage.RoleViewer, "POST", "/api/v1/release", req); code != 403 || !strings.Contains(out["error"].(string), "viewer") {
		t.Fatalf("viewer release: %d %v", code, out)
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"k1"}`); code != 400 || !strings.Contains(out["error"].(string), "reason") {
		t.Fatalf("no reason: %d %v", code, out)
	}
	// The reason goes to the audit log, bounded as the console's forms bound it.
	long := `{"source":"ota","key":"k1","reason":"` + strings.Repeat("x", 501) + `"}`
	if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", long); code != 400 || !strings.Contains(out["error"].(string), "to 500 characters at most") {
		t.Fatalf("a 501-character reason: %d %v", code, out)
	}
	// A control character is refused, named: the reason is kept in the audit log for
	// good, and a NUL is text PostgreSQL cannot hold. A line break is text.
	for _, bad := range []string{`refund \u0000reissued`, `refund \u001b[31mreissued`, `re\u0085fund`} {
		body := `{"source":"ota","key":"k1","reason":"` + bad + `"}`
		if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", body); code != 400 || !strings.Contains(out["error"].(string), "control character (U+") {
			t.Fatalf("reason %s: %d %v", bad, code, out)
		}
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"nope","reason":"two\nlines"}`); code != 404 || !strings.Contains(out["error"].(string), "no such key") {
		t.Fatalf("unknown key: %d %v", code, out)
	}
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", req)
	if code != 200 || out["changed"] != true || out["previous"] != "processed" || out["state"] != "released" {
		t.Fatalf("release: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release", req)
	if code != 200 || out["changed"] != false {
		t.Fatalf("second release: %d %v", code, out)
	}
	// One row for the release, none for the release that changed nothing; below them,
	// the rows of the test's setup (users and tokens added).
	audit, err := e.db.AuditLog(context.Background(), 0, 10)
	if err != nil || len(audit) < 2 || audit[0].Actor != "operator-user" || audit[0].Reason != "refund reissued by hand" ||
		audit[1].Actor != "test" {
		t.Fatalf("audit = %+v, %v", audit, err)
	}

	// Bulk: every failed key of the source, reprocessed.
	for _, k := range []string{"f1", "f2"} {
		e.record(t, k, `{}`, true)
		e.db.FinishAttempt(context.Background(), leased(t, e.db, k), storage.Attempt{Source: "ota", Key: k, StartedAt: time.Now()},
			storage.AttemptResult{Failed: true, LastError: "downstream answered 500"})
	}
	code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","state":"failed","reason":"downstream fixed","reprocess":true}`)
	if code != 200 || out["matched"] != float64(2) || out["changed"] != float64(2) {
		t.Fatalf("bulk: %d %v", code, out)
	}
	c, _ := e.db.Claim(context.Background(), "ota", "f1")
	if c.State != storage.StateProcessing {
		t.Fatalf("f1 after bulk reprocess = %s", c.State)
	}

	// A key of a source this server does not run (renamed or removed): nothing here
	// would send it, so it is not reprocessed, one key or a set; a release frees it.
	gone := &storage.Delivery{Source: "pms", Key: "g1", KeyMethod: storage.MethodEventID, PayloadHash: "h", Body: []byte(`{}`)}
	if err := e.db.Record(context.Background(), gone, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"source":"pms","key":"g1","reason":"r","reprocess":true}`, `{"source":"pms","state":"processed","reason":"r","reprocess":true}`} {
		code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release", body)
		if msg, _ := out["error"].(string); code != 400 || !strings.Contains(msg, `source "pms" is not in this server's configuration`) {
			t.Fatalf("reprocess %s: %d %v; want 400 naming the source", body, code, out)
		}
	}
	if c, _ := e.db.Claim(context.Background(), "pms", "g1"); c.State != storage.StateProcessed {
		t.Fatalf("pms/g1 after refused reprocesses = %s, want processed as it was", c.State)
	}
	code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"pms","key":"g1","reason":"r"}`)
	if code != 200 || out["changed"] != true {
		t.Fatalf("release of a key of a source not run: %d %v", code, out)
	}
}

// leased leases key's job as a dispatcher would.
func leased(t *testing.T, db *sqlite.DB, key string) storage.Job {
	t.Helper()
	jobs, err := db.LeaseDue(context.Background(), time.Now().Add(time.Second), time.Minute, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key == key {
			return j
		}
	}
	t.Fatalf("no job for %s", key)
	return storage.Job{}
}

func idStr(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAPI_BulkRefusalWords: a key that a bulk release leaves alone says why in the API's
// own words, not in storage's.
func TestAPI_BulkRefusalWords(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "in-flight", `{}`, true) // processing since now: not stuck
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","state":"processing","reason":"r"}`)
	results, _ := out["results"].([]any)
	if code != 200 || len(results) != 1 {
		t.Fatalf("bulk: %d %v", code, out)
	}
	r := results[0].(map[string]any)
	if r["changed"] != false || r["error"] != storage.RefusedBusy.Message() || strings.Contains(r["error"].(string), "since") {
		t.Fatalf("a key in flight: %v", r)
	}
}

// A set named by a misspelt state, or stuck beside a state no stuck key is in, would
// match nothing and answer "matched 0" (or an empty list), read as "nothing is stuck":
// it is refused, naming what is wrong. Stuck with failed is a set like any other.
func TestAPI_ReleaseSetFilter(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false)
	for _, tt := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/release", `{"source":"ota","state":"Failed","reason":"r"}`, `state "Failed"`},
		{"POST", "/api/v1/release", `{"source":"ota","stuck":true,"state":"processed","reason":"r"}`, `stuck with state "processed"`},
		{"GET", "/api/v1/keys?stuck=true&state=released", "", `stuck with state "released"`},
	} {
		code, out := e.call(t, storage.RoleOperator, tt.method, tt.path, tt.body)
		if msg, _ := out["error"].(string); code != 400 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s %s %s: %d %v; want 400 naming %s", tt.method, tt.path, tt.body, code, out, tt.want)
		}
	}
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","stuck":true,"state":"failed","reason":"r"}`)
	if code != 200 || out["matched"] != float64(0) {
		t.Errorf("stuck and failed: %d %v; want 200, none matched", code, out)
	}
}

// TestAPI_BodyTrailingDataRefused: a body holds one JSON value: two objects run
// together, or anything else after the first, is refused with 400 saying so, and
// nothing of it is done; white space after the value is no more data.
func TestAPI_BodyTrailingDataRefused(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false)
	e.record(t, "k2", `{}`, false)
	k1 := `{"source":"ota","key":"k1","reason":"PMS restored"}`
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/release", k1 + "\n" + `{"source":"ota","key":"k2","reason":"PMS restored","reprocess":true}`},
		{"/api/v1/release", k1 + "]"},
		{"/api/v1/release", k1 + " 1"},
		{"/api/v1/bulk/1/cancel", `{"reason":"a"}{"reason":"b"}`},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "more data after the JSON value") {
			t.Errorf("POST %s %q: %d %v; want 400, more data after the JSON value", tc.path, tc.body, code, out)
		}
	}
	for _, key := range []string{"k1", "k2"} {
		if cl, err := e.db.Claim(context.Background(), "ota", key); err != nil || cl.State != storage.StateProcessed {
			t.Errorf("%s after bodies refused: %+v, %v; want it processed still", key, cl, err)
		}
	}
	if code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", k1+" \r\n\t"); code != http.StatusOK {
		t.Errorf("a body with white space after its value: %d %v; want 200", code, out)
	}
}

// TestAPI_BodyRepeatedFieldRefused: a field given twice in a body is refused with 400
// naming it, and nothing of the body is done, as a query parameter given twice is: the
// decoder keeps the last value, so a key named twice (a script that sets a field where
// it meant to replace one) would act on the second key without a word. Field names
// match without case, so "key" and "Key" are one field given twice.
func TestAPI_BodyRepeatedFieldRefused(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false)
	e.record(t, "k2", `{}`, false)
	for _, tc := range []struct{ path, body, want string }{
		{"/api/v1/release", `{"source":"ota","key":"k1","reason":"PMS restored","key":"k2"}`, "field key given 2 times"},
		{"/api/v1/release", `{"source":"ota","key":"k1","reason":"r","Key":"k2","KEY":"k1","reprocess":true}`, "field key given 3 times"},
		{"/api/v1/bulk", `{"kind":"release","reason":"r","filter":{"source":"ota","key":"k1","source":"pms"}}`, "field filter.source given 2 times"},
		{"/api/v1/suspects/1/review", `{"state":"confirmed","reason":"r","state":"dismissed"}`, "field state given 2 times"},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), tc.want) {
			t.Errorf("POST %s %s: %d %v; want 400, %s", tc.path, tc.body, code, out, tc.want)
		}
	}
	for _, key := range []string{"k1", "k2"} {
		if cl, err := e.db.Claim(context.Background(), "ota", key); err != nil || cl.State != storage.StateProcessed {
			t.Errorf("%s after bodies refused: %+v, %v; want it processed still", key, cl, err)
		}
	}
	if code, out := e.call(t, storage.RoleOperator, "GET", "/api/v1/bulk", ""); code != 200 || fmt.Sprint(out["actions"]) != "[]" {
		t.Errorf("bulk actions after a body refused: %d %v; want none", code, out)
	}
	// The same name in two objects is no repetition.
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/bulk", `{"kind":"release","reason":"r","filter":{"source":"ota","key":"k1"}}`)
	if code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("a bulk preview: %d %v; want it made", code, out)
	}
}

// TestAPI_PathIDsNamed: an id in an endpoint's path that is no id (a word, 0, a negative
// number) is refused with 400 naming what it should be, on every endpoint alike, and an
// id of nothing stored is a 404 that names the thing and the id, as an unknown key's
// and suspect's are, not a bare "not found".
func TestAPI_PathIDsNamed(t *testing.T) {
	e := newAPIEnv(t)
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/api/v1/deliveries/abc", "", `delivery id "abc": want an id, a whole number from 1`},
		{"GET", "/api/v1/deliveries/0", "", `delivery id "0": want an id, a whole number from 1`},
		{"GET", "/api/v1/deliveries/-1", "", `delivery id "-1": want an id, a whole number from 1`},
		{"GET", "/api/v1/bulk/0", "", `bulk action id "0": want an id, a whole number from 1`},
		{"POST", "/api/v1/bulk/-3/cancel", "", `bulk action id "-3": want an id, a whole number from 1`},
		{"POST", "/api/v1/suspects/0/review", `{"state":"confirmed","reason":"r"}`, `suspect id "0": want an id, a whole number from 1`},
		{"POST", "/api/v1/alerts/abc/acknowledge", "", `alert id "abc": want an id, a whole number from 1`},
	} {
		code, out := e.call(t, storage.RoleOperator, tc.method, tc.path, tc.body)
		if code != http.StatusBadRequest || fmt.Sprint(out["error"]) != tc.want {
			t.Errorf("%s %s: %d %v; want 400, %s", tc.method, tc.path, code, out, tc.want)
		}
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/api/v1/deliveries/99999", "", "no such delivery: 99999"},
		{"GET", "/api/v1/bulk/99999", "", "no such bulk action: 99999"},
		{"POST", "/api/v1/bulk/99999/cancel", "", "no such bulk action: 99999"},
		{"POST", "/api/v1/suspects/99999/review", `{"state":"confirmed","reason":"r"}`, "no such suspect: 99999"},
		{"POST", "/api/v1/alerts/99999/resolve", "", "no such alert: 99999"},
	} {
		code, out := e.call(t, storage.RoleOperator, tc.method, tc.path, tc.body)
		if code != http.StatusNotFound || fmt.Sprint(out["error"]) != tc.want {
			t.Errorf("%s %s: %d %v; want 404, %s", tc.method, tc.path, code, out, tc.want)
		}
	}
}

// TestAPI_BadValuesNamed: a value of the wrong kind is refused, naming the parameter or
// the field in JSON's terms, never a Go type; stuck takes true or false only.
func TestAPI_BadValuesNamed(t *testing.T) {
	e := newAPIEnv(t)
	for _, q := range []string{"stuck=1", "stuck=yes", "stuck=True"} {
		code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/keys?"+q, "")
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "stuck") {
			t.Errorf("%s: %d %v; want 400 naming stuck", q, code, out)
		}
	}
	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", `{"source":"ota","key":"k","reason":"r","reprocess":"yes"}`)
	msg := fmt.Sprint(out["error"])
	if code != http.StatusBadRequest || !strings.Contains(msg, "field reprocess") || !strings.Contains(msg, "true or false") ||
		strings.Contains(msg, "Go") || strings.Contains(msg, "releaseRequest") {
		t.Errorf("reprocess of the wrong type: %d %q; want 400 naming the field in JSON's terms", code, msg)
	}
}
