package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestFailover_ReadOnlyServerLeftForTheWritable: a replica's URL names two servers
// with target_session_attrs=read-write, as README advises for failover. The first,
// the primary it connected to, is fenced read-only by a switchover (its connections
// stay up, refusing writes), and the second, promoted, takes writes. The replica's
// readiness, intake and other writes find the writable server within seconds, by
// themselves: the pool's connections to the read-only one, which every write kept
// using, would have held the replica at 503 until their lifetime ran out, an hour.
func TestFailover_ReadOnlyServerLeftForTheWritable(t *testing.T) {
	ctx := t.Context()
	promoted := postgrestest.NewDatabase(t) // on the shared cluster
	open(t, promoted).Close()
	pu, err := url.Parse(promoted)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(pu.Path, "/")
	password, _ := pu.User.Password()

	fenced := postgrestest.NewCluster(t)
	fencedURL := fenced.NewDatabase(t, name)
	fu, err := url.Parse(fencedURL)
	if err != nil {
		t.Fatal(err)
	}
	admin := postgrestest.Connect(t, fencedURL)
	// One password for both servers, as one role replicated to a standby has.
	if _, err := admin.Exec(ctx, `ALTER ROLE postgres PASSWORD `+quoteLiteral(password)); err != nil {
		t.Fatal(err)
	}
	both := fmt.Sprintf("postgres://postgres:%s@%s,%s/%s?sslmode=disable&target_session_attrs=read-write",
		url.QueryEscape(password), fu.Host, pu.Host, name)
	db, err := postgres.Open(ctx, both, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	delivery := func(key string) *storage.Delivery {
		return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
			Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
	}
	if err := db.Record(ctx, delivery("before"), storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatalf("record on the primary: %v", err)
	}

	if _, err := admin.Exec(ctx, `ALTER SYSTEM SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	// The reload reaches every backend of the fenced server, the replica's included.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ro string
		if err := admin.QueryRow(ctx, `SELECT current_setting('default_transaction_read_only')`, pgx.QueryExecModeExec).Scan(&ro); err != nil {
			t.Fatal(err)
		}
		if ro == "on" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fenced server is not read-only 5 s after its reload")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // every backend has taken the reload

	check := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		end := time.Now().Add(10 * time.Second)
		for {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := f(cctx)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(end) {
				t.Errorf("%s still fails 10 s after the primary was fenced read-only, with a writable server named: %v", what, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	check("readiness", db.Ping)
	check("intake", func(ctx context.Context) error {
		return db.Record(ctx, delivery("after"), storage.ClaimOptions{TTL: time.Hour})
	})
	check("a setting's write", func(ctx context.Context) error { return db.SetSetting(ctx, "failover", "done") })
	var moved bool
	if err := postgrestest.Connect(t, promoted).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM settings WHERE name = 'failover')`).Scan(&moved); err != nil || !moved {
		t.Errorf("the write is not on the promoted server (%v)", err)
	}
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
