package sqlite_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// hexHash is a forensic hash as the receiver makes one: the hex SHA-256 of s.
func hexHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestOpen_ForensicKeysUpgrade: a database whose business and correlation keys were
// stored as hex text, in tables ordered by the text, is converted as it is opened: the
// hashes of 32 bytes in 32 bytes, any other text as it was, the keys not yet moved under
// the rowids the writer knows them by. Every key converted still matches a new
// delivery, is released and swept, and a copy reads it as the text it was.
func TestOpen_ForensicKeysUpgrade(t *testing.T) {
	defer sqlite.SetForensicFlushAt(6)()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	clk := newClock(db)
	moved, pending, odd := hexHash("moved"), hexHash("pending"), "B\x00odd"
	recordOne(t, db, forensicDelivery("ota", "evt_1", moved, hexHash("c1")))
	recordOne(t, db, forensicDelivery("ota", "evt_2", odd, hexHash("c2")))
	recordOne(t, db, forensicDelivery("ota", "evt_3", hexHash("b3"), hexHash("c3"))) // six keys: moved
	recordOne(t, db, forensicDelivery("ota", "evt_4", pending, hexHash("c4")))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of before, the hashes as text.
	const text = `CASE WHEN typeof(hash) = 'blob' THEN lower(hex(hash)) ELSE hash END`
	execFile(t, path,
		`CREATE TABLE bk_old (source TEXT NOT NULL, hash TEXT NOT NULL, delivery INTEGER NOT NULL, seen_at INTEGER NOT NULL,
			PRIMARY KEY (source, hash, delivery)) WITHOUT ROWID`,
		`INSERT INTO bk_old SELECT source, `+text+`, delivery, seen_at FROM business_keys`,
		`DROP TABLE business_keys`,
		`ALTER TABLE bk_old RENAME TO business_keys`,
		`CREATE INDEX business_keys_seen ON business_keys (seen_at)`,
		`CREATE TABLE ck_old (rule TEXT NOT NULL, hash TEXT NOT NULL, source TEXT NOT NULL, delivery INTEGER NOT NULL,
			seen_at INTEGER NOT NULL, PRIMARY KEY (rule, hash, delivery)) WITHOUT ROWID`,
		`INSERT INTO ck_old SELECT rule, `+text+`, source, delivery, seen_at FROM correlation_keys`,
		`DROP TABLE correlation_keys`,
		`ALTER TABLE ck_old RENAME TO correlation_keys`,
		`CREATE INDEX correlation_keys_seen ON correlation_keys (seen_at)`,
		`CREATE TABLE p_old (rule TEXT NOT NULL, hash TEXT NOT NULL, source TEXT NOT NULL, delivery INTEGER NOT NULL, seen_at INTEGER NOT NULL)`,
		`INSERT INTO p_old (rowid, rule, hash, source, delivery, seen_at) SELECT rowid, rule, `+text+`, source, delivery, seen_at FROM forensic_keys_pending`,
		`DROP TABLE forensic_keys_pending`,
		`ALTER TABLE p_old RENAME TO forensic_keys_pending`,
		`DELETE FROM migrations WHERE name LIKE '%0023_%'`,
	)
	raw := rawDB(t, path)
	var pendingRowids string
	if err := raw.QueryRow(`SELECT group_concat(rowid || ':' || delivery, ',') FROM (SELECT rowid, delivery FROM forensic_keys_pending ORDER BY rowid)`).Scan(&pendingRowids); err != nil {
		t.Fatal(err)
	}
	if pendingRowids == "" {
		t.Fatal("the fixture left no key pending")
	}
	raw.Close()

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	db.Now = clk.Now
	raw = rawDB(t, path)
	for _, q := range []struct{ what, sql, want string }{
		{"business key hashes", `SELECT group_concat(typeof(hash) || length(hash), ',') FROM (SELECT hash FROM business_keys ORDER BY delivery)`, "blob32,text1,blob32"},
		{"correlation key hashes", `SELECT group_concat(DISTINCT typeof(hash) || length(hash)) FROM correlation_keys`, "blob32"},
		{"pending key hashes", `SELECT group_concat(DISTINCT typeof(hash) || length(hash)) FROM forensic_keys_pending`, "blob32"},
		{"pending rowids", `SELECT group_concat(rowid || ':' || delivery, ',') FROM (SELECT rowid, delivery FROM forensic_keys_pending ORDER BY rowid)`, pendingRowids},
		{"indexes", `SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE type = 'index'
			AND tbl_name IN ('business_keys', 'correlation_keys', 'forensic_keys_pending') ORDER BY name)`,
			"business_keys_hash,business_keys_seen,correlation_keys_hash,correlation_keys_seen"},
		{"integrity", `PRAGMA integrity_check`, "ok"},
	} {
		var got string
		if err := raw.QueryRow(q.sql).Scan(&got); err != nil || got != q.want {
			t.Errorf("%s: %q, %v; want %q", q.what, got, err, q.want)
		}
	}

	// A copy reads every key as the text it was stored from.
	snap, err := sqlite.OpenSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = snap.ReadTable(ctx, "business_keys", []string{"hash"}, func(row []any) error {
		seen[row[0].(string)] = true
		return nil
	})
	snap.Close()
	if err != nil || !seen[moved] || !seen[pending] || !seen[odd] || len(seen) != 4 {
		t.Errorf("business keys a copy reads: %v, %v", seen, err)
	}

	// Each converted key matches: moved or pending, hex or not.
	for _, c := range []struct{ key, business string }{{"evt_5", moved}, {"evt_6", pending}, {"evt_7", odd}} {
		clk.Add(time.Second)
		if d := recordOne(t, db, forensicDelivery("ota", c.key, c.business, hexHash("c-"+c.key))); !flagged(d, storage.SuspectBusinessKey) {
			t.Errorf("%s, business key %q of before: flags %v, want a business key", c.key, c.business, d.Suspects)
		}
	}
	if d := recordOne(t, db, forensicDelivery("payments", "pay_1", "", hexHash("c1"))); !flagged(d, storage.SuspectCorrelation) {
		t.Errorf("a correlation key of before: flags %v, want a correlation", d.Suspects)
	}
	probe, err := db.WouldFlag(ctx, storage.Probe{Source: "payments", Key: "pay_9", Correlations: []storage.CorrelationKey{{Rule: "r", Hash: hexHash("c4"), Window: time.Hour}}, Now: clk.Now()})
	if err != nil || len(probe) != 1 || probe[0].Kind != storage.SuspectCorrelation {
		t.Errorf("the key lab on a pending correlation key of before: %+v, %v", probe, err)
	}

	// Released, a key of before is forgotten.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_3", Actor: "ann", Reason: "test", StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if d := recordOne(t, db, forensicDelivery("ota", "evt_8", hexHash("b3"), hexHash("c8"))); flagged(d, storage.SuspectBusinessKey) {
		t.Errorf("a business key of before, released: flags %v, want none", d.Suspects)
	}

	// Swept once their window has passed, all of them.
	clk.Add(2 * time.Hour)
	if _, err := db.SweepBusinessKeys(ctx, clk.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SweepCorrelationKeys(ctx, clk.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	if pending, indexed, err := db.ForensicKeyCounts(ctx); err != nil || pending+indexed != 0 {
		t.Errorf("after the sweeps: %d keys pending, %d indexed, %v; want none", pending, indexed, err)
	}
}
