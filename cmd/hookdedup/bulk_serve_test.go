package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestServe_BulkActions: serve hands the configured approval thresholds to the console
// and runs bulk actions in the background: a release started through the API ends done
// without anything else running it.
func TestServe_BulkActions(t *testing.T) {
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(filepath.Join(dir, "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.Database = "127.0.0.1:0", filepath.Join(dir, "hookdedup.db")
	cfg.ApprovalThreshold = storage.ApprovalThresholds{"EUR": "10.00"}
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	for i, amount := range []string{"8.00", "7.50"} {
		storagetest.Record(t, p.db, &storage.Delivery{Source: "ota", Status: 200, Key: fmt.Sprintf("k%d", i), KeyMethod: "event_id",
			PayloadHash: "h", Amount: amount, Currency: "EUR", Body: []byte(`{}`), ContentType: "application/json"},
			storage.ClaimOptions{TTL: time.Hour})
	}
	tok, _, err := p.db.CreateToken(ctx, "admin", "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, p.public.url()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s %v %v", method, path, resp.Status, out, err)
		}
		return out
	}
	if out := call("POST", "/api/v1/bulk", `{"kind":"reprocess","reason":"r","filter":{"source":"ota"}}`); out["needs_approval"] != true {
		t.Errorf("a reprocess of EUR 15.50 over a threshold of 10.00: %v; want needs_approval", out)
	}
	out := call("POST", "/api/v1/bulk", `{"kind":"release","reason":"r","filter":{"source":"ota"}}`)
	id := out["id"].(string)
	call("POST", "/api/v1/bulk/"+id+"/start", "")
	storagetest.Eventually(t, 30*time.Second, func() error {
		if out := call("GET", "/api/v1/bulk/"+id, ""); out["state"] != storage.BulkDone || out["changed"] != float64(2) {
			return fmt.Errorf("%v, %v changed", out["state"], out["changed"])
		}
		return nil
	})
}
