package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestImport_ForensicHashes: the business and correlation keys of a SQLite database,
// hex SHA-256 hashes as the receiver makes them (which SQLite stores in 32 bytes), are
// copied into PostgreSQL as the same hex text, and match the deliveries that repeat
// them there.
func TestImport_ForensicHashes(t *testing.T) {
	ctx := context.Background()
	hash := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	business, correlation := hash("business"), hash("correlation")
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	rec := func(db storage.Store, source, key, business, correlation string) *storage.Delivery {
		d := &storage.Delivery{Source: source, Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h-" + key,
			Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json", BusinessKey: business,
			Correlations: []storage.CorrelationKey{{Rule: "refunds", Hash: correlation, Window: time.Hour}}}
		return storagetest.Record(t, db, d, opt)
	}
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	lite := storagetest.OpenPath(t, path, sqlite.Options{})
	first := rec(lite, "ota", "evt_1", business, correlation)
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, url, _, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url)
	var got [2]string
	if err := conn.QueryRow(ctx, `SELECT (SELECT hash FROM business_keys), (SELECT hash FROM correlation_keys)`).Scan(&got[0], &got[1]); err != nil {
		t.Fatal(err)
	}
	if got != [2]string{business, correlation} {
		t.Errorf("hashes copied: %q, want %q", got, [2]string{business, correlation})
	}
	// Each against the copied delivery alone: the correlation first, before a delivery
	// of PostgreSQL's own carries the same hash.
	for _, c := range []struct {
		source, key, business, correlation string
		kind                               storage.SuspectKind
	}{
		{"payments", "pay_1", "", correlation, storage.SuspectCorrelation},
		{"ota", "evt_2", business, hash("another"), storage.SuspectBusinessKey},
	} {
		d := rec(db, c.source, c.key, c.business, c.correlation)
		flags, err := db.FlagsOf(ctx, d.ID)
		if err != nil || len(flags.Suspects) != 1 || flags.Suspects[0].Kind != c.kind || flags.Suspects[0].Other != first.ID {
			t.Errorf("%s, a %s copied: %+v, %v; want one naming delivery %d", c.key, c.kind, flags.Suspects, err, first.ID)
		}
	}
}
