package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestForensics_UnknownSourceRefused: the ledger (its page, its export, the API's) and
// the suspects (their page, the API's list) answered a source filter naming no source
// with an empty ledger or list, so a misspelt source in a bookmark or a script read as
// no money at risk and nothing to review. They refuse it with 400, naming it and the
// configured sources, as the events and keys lists do. A configured source with
// nothing flagged, and a source removed from the configuration whose suspects are
// still stored (its deliveries swept), are answered as before.
func TestForensics_UnknownSourceRefused(t *testing.T) {
	e := newConsoleEnv(t)
	storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: 999_999, Other: e.first.ID,
		Source: "gone", OtherSource: "ota", Rule: "double-refund", Amount: "190.00", Currency: "EUR", FlaggedAt: e.db.Now()})
	v := e.as(t, storage.RoleViewer)
	for _, path := range []string{"/ledger?source=otaa", "/ledger.csv?source=otaa", "/suspects?source=otaa",
		"/suspects?state=all&source=otaa"} {
		code, body := v.get(path)
		text := parsePage(t, body).text()
		if code != http.StatusBadRequest || !strings.Contains(text, `No source "otaa"`) || !strings.Contains(text, "ota, pms") {
			t.Errorf("%s = %d %q; want 400 naming the source otaa and the configured ones", path, code, text)
		}
	}
	for _, path := range []string{"/ledger?source=pms", "/ledger.csv?source=pms", "/suspects?source=pms",
		"/ledger?source=gone", "/suspects?source=gone"} {
		if code, _ := v.get(path); code != http.StatusOK {
			t.Errorf("%s = %d, want 200", path, code)
		}
	}
	if _, p := v.page("/suspects?source=gone"); p.testid("suspect-row").len() != 1 {
		t.Errorf("/suspects?source=gone lists %d suspects, want its one", p.testid("suspect-row").len())
	}

	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleViewer, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	call := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/api/v1/ledger?source=otaa", "/api/v1/suspects?source=otaa"} {
		if code, body := call(path); code != http.StatusBadRequest || !strings.Contains(body, `No source \"otaa\"`) {
			t.Errorf("%s = %d %s; want 400 naming the source", path, code, body)
		}
	}
	for _, path := range []string{"/api/v1/ledger?source=pms", "/api/v1/suspects?source=pms", "/api/v1/suspects?source=gone"} {
		if code, body := call(path); code != http.StatusOK {
			t.Errorf("%s = %d %s; want 200", path, code, body)
		}
	}
}
