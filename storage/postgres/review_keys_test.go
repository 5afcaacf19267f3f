package postgres_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestForensicKeys_DeletedUnderPublication: an operator who publishes the database's
// tables for logical replication (a move to another server or major version, a
// managed provider's blue/green switch, change data capture) must still be able to
// release a key and sweep old forensic keys. PostgreSQL refuses a DELETE of a
// published table that has no replica identity: every table needs a primary key, or
// another identity, for its deletes to be replicated.
func TestForensicKeys_DeletedUnderPublication(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `CREATE PUBLICATION everything FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	d := businessDelivery("evt_1", "B")
	d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: "R", Window: time.Hour}}
	if err := db.Record(ctx, d, opt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "resend"}); err != nil {
		t.Fatalf("release under a publication: %v", err)
	}
	if err := db.Record(ctx, businessDelivery("evt_2", "B2"), opt); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SweepBusinessKeys(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Errorf("sweep of business keys under a publication: %d, %v; want 1 deleted", n, err)
	}
	if n, err := db.SweepCorrelationKeys(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Errorf("sweep of correlation keys under a publication: %d, %v; want 1 deleted", n, err)
	}
}
