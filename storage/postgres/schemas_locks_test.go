package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestTwoSchemas_LocksApart: two installations kept in two schemas of one database
// take advisory locks of their own. While a replica of one holds its audit lock (it
// writes its audit log) and its sweep's lock, the other writes its own audit log at
// once and sweeps its own expired claims, rather than waiting for, or skipping its
// round behind, work on tables it does not share.
func TestTwoSchemas_LocksApart(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	if _, err := postgrestest.Connect(t, url).Exec(ctx, `CREATE SCHEMA tenant_a; CREATE SCHEMA tenant_b`); err != nil {
		t.Fatal(err)
	}
	a := open(t, url+"&search_path=tenant_a")
	b := open(t, url+"&search_path=tenant_b")

	other := postgrestest.Connect(t, url+"&search_path=tenant_a") // a replica of a, mid-transaction
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, lock := range []int64{postgres.AuditLock, postgres.SweepExpiredLock} {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, postgres.LockID(a, lock)); err != nil {
			t.Fatal(err)
		}
	}

	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.AppendAudit(actx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota"}); err != nil {
		t.Errorf("audit of one installation while the other's audit lock is held: %v", err)
	}

	past := time.Now().Add(-time.Hour)
	if err := b.Record(ctx, &storage.Delivery{Source: "ota", Key: "k", Body: []byte(`{}`), ReceivedAt: past},
		storage.ClaimOptions{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.SweepExpired(ctx, time.Now(), 100); n != 1 || err != nil {
		t.Errorf("sweep of one installation while the other's sweep runs: %d, %v; want its expired claim swept", n, err)
	}
}

// TestSchemaRecreated_LocksShared: the replicas of one installation share its locks
// when its schema was made again under its name (restored from pg_dump, moved to a new
// server by pg_upgrade or logical replication): one still running from before takes
// the same audit lock as one started since, and their audit entries queue behind each
// other. Told apart by the schema's oid, which the new schema does not keep, the two
// wrote the audit chain at once, and swept and rolled up together.
func TestSchemaRecreated_LocksShared(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	admin := postgrestest.Connect(t, url)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA hookdedup`); err != nil {
		t.Fatal(err)
	}
	before := open(t, url+"&search_path=hookdedup") // running while the schema is made again
	if _, err := admin.Exec(ctx, `ALTER SCHEMA hookdedup RENAME TO hookdedup_dumped; CREATE SCHEMA hookdedup`); err != nil {
		t.Fatal(err)
	}
	since := open(t, url+"&search_path=hookdedup")

	tx, err := postgrestest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, postgres.LockID(before, postgres.AuditLock)); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := since.AppendAudit(actx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota"}); err == nil {
		t.Errorf("audit while another replica of the installation holds the audit lock: written at once, want it to wait")
	}
}
