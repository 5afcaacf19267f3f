package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// refHash is the chain's encoding as the documentation gives it, written apart from
// storage's own so that the two can disagree: SHA-256 over length-prefixed fields, the
// previous hash first.
func refHash(prev string, id, at int64, actor, action, source, key, reason, previous string) string {
	var b []byte
	for _, v := range []string{prev, "hookdedup audit v1", fmt.Sprint(id), fmt.Sprint(at), actor, action, source, key, reason, previous} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(v)))
		b = append(b, v...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// auditFixture is a database whose audit log holds n rows written by hookdedup's own
// writers.
func auditFixture(t *testing.T, n int) (*sqlite.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota",
			Reason: fmt.Sprintf("look %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return db, path
}

// TestVerifyAudit_Tampered changes the log as someone with the database file could, and
// finds the first row that breaks the chain, and how.
func TestVerifyAudit_Tampered(t *testing.T) {
	// forge gives row id the hash it would have chained after the row before it, as
	// someone who knows the encoding would.
	forge := func(t *testing.T, raw *sql.DB, id int64) {
		var prev string
		if err := raw.QueryRow(`SELECT coalesce((SELECT hash FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT 1), ?)`,
			id, storage.AuditGenesis).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		var at int64
		var actor, action, source, key, reason, previous string
		if err := raw.QueryRow(`SELECT at, actor, action, source, key, reason, previous_state FROM audit_log WHERE id = ?`, id).
			Scan(&at, &actor, &action, &source, &key, &reason, &previous); err != nil {
			t.Fatal(err)
		}
		rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET hash = '%s' WHERE id = %d`,
			refHash(prev, id, at, actor, action, source, key, reason, previous), id))
	}
	const insertRow = `INSERT INTO audit_log (id, at, actor, action, reason, hash) VALUES (%d, 1, 'mallory', 'release', 'nothing to see', '%s')`
	// Six rows, 1 to 6, each case on a fresh copy.
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, raw *sql.DB)
		id     int64
		kind   string
		rows   int64 // rows that still chain before the break
	}{
		{"EditedReason", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET reason = 'routine' WHERE id = 3`)
		}, 3, storage.AuditEdited, 2},
		{"EditedLastRow", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET actor = 'bob' WHERE id = 6`)
		}, 6, storage.AuditEdited, 5},
		{"EditedTime", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET at = at + 3600000 WHERE id = 2`)
		}, 2, storage.AuditEdited, 1},
		{"HashNotADigest", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET hash = 'x' WHERE id = 4`)
		}, 4, storage.AuditEdited, 3},
		{"DeletedMiddle", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `DELETE FROM audit_log WHERE id = 3`)
		}, 4, storage.AuditDeleted, 2},
		{"DeletedFirst", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `DELETE FROM audit_log WHERE id IN (1, 2)`)
		}, 3, storage.AuditDeleted, 0},
		{"DeletedAndRenumbered", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `DELETE FROM audit_log WHERE id = 3`,
				`UPDATE audit_log SET id = id + 100 WHERE id > 3`, `UPDATE audit_log SET id = id - 101 WHERE id > 100`)
		}, 3, storage.AuditDeleted, 2},
		{"InsertedWithoutHash", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, fmt.Sprintf(insertRow, 7, ""))
		}, 7, storage.AuditInserted, 6},
		{"InsertedAndRenumbered", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET id = id + 100 WHERE id >= 4`, `UPDATE audit_log SET id = id - 99 WHERE id > 100`,
				fmt.Sprintf(insertRow, 4, strings.Repeat("ab", 32)))
		}, 4, storage.AuditInserted, 3},
		{"InsertedForged", func(t *testing.T, raw *sql.DB) {
			// The new row's own link is right; the row after it shows it does not belong.
			rawExec(t, raw, `UPDATE audit_log SET id = id + 100 WHERE id >= 4`, `UPDATE audit_log SET id = id - 99 WHERE id > 100`,
				fmt.Sprintf(insertRow, 4, ""))
			forge(t, raw, 4)
		}, 4, storage.AuditInserted, 3},
		{"InsertedFirst", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, fmt.Sprintf(insertRow, 0, ""))
			forge(t, raw, 0)
		}, 0, storage.AuditInserted, 0},
		{"SwappedRows", func(t *testing.T, raw *sql.DB) {
			rawExec(t, raw, `UPDATE audit_log SET id = 100 WHERE id = 3`, `UPDATE audit_log SET id = 3 WHERE id = 4`,
				`UPDATE audit_log SET id = 4 WHERE id = 100`)
		}, 3, storage.AuditReordered, 2},
		{"SwappedContents", func(t *testing.T, raw *sql.DB) {
			// Every column but the id and the hash, as a swap of the rows' places.
			var sets []string
			for _, col := range []string{"at", "actor", "action", "source", "key", "reason", "previous_state"} {
				sets = append(sets, fmt.Sprintf("%s = (SELECT %s FROM r WHERE r.id = 7 - audit_log.id)", col, col))
			}
			rawExec(t, raw, `CREATE TEMP TABLE r AS SELECT * FROM audit_log WHERE id IN (3, 4)`,
				`UPDATE audit_log SET `+strings.Join(sets, ", ")+` WHERE id IN (3, 4)`)
		}, 3, storage.AuditReordered, 2},
		{"EditedAndRehashed", func(t *testing.T, raw *sql.DB) {
			// The edited row's own link is made right: the break shows at the next row.
			rawExec(t, raw, `UPDATE audit_log SET reason = 'routine' WHERE id = 3`)
			forge(t, raw, 3)
		}, 4, storage.AuditEdited, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, path := auditFixture(t, 6)
			tc.tamper(t, rawDB(t, path))
			c, err := db.VerifyAudit(context.Background(), storage.AuditAnchor{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Break == nil {
				t.Fatalf("verify found the chain intact: %+v", c)
			}
			t.Logf("%s: %s", c.Break.Kind, c.Break.Detail)
			if c.Break.ID != tc.id || c.Break.Kind != tc.kind || c.Rows != tc.rows {
				t.Errorf("break at row %d (%s), %d rows chain; want row %d (%s), %d rows", c.Break.ID, c.Break.Kind, c.Rows,
					tc.id, tc.kind, tc.rows)
			}
			if !strings.Contains(c.Break.Detail, fmt.Sprintf("row %d", tc.id)) {
				t.Errorf("the detail does not name row %d: %s", tc.id, c.Break.Detail)
			}
			// The console's bounded check finds the same.
			b, err := db.AuditChain(context.Background())
			if err != nil || b.Break == nil || *b.Break != *c.Break {
				t.Errorf("AuditChain = %+v, %v; want the break %+v", b, err, *c.Break)
			}
		})
	}
}

// TestVerifyAudit_Anchor: a chain rewritten whole, hashes recomputed, and a log cut at
// its end both verify on their own; the anchor noted before shows them.
func TestVerifyAudit_Anchor(t *testing.T) {
	ctx := context.Background()
	t.Run("Rewritten", func(t *testing.T) {
		db, path := auditFixture(t, 5)
		before, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
		if err != nil || before.Break != nil {
			t.Fatal(before, err)
		}
		anchor := storage.AuditAnchor{ID: before.LastID, Hash: before.LastHash}
		raw := rawDB(t, path)
		rawExec(t, raw, `UPDATE audit_log SET reason = 'routine' WHERE id = 2`)
		prev := storage.AuditGenesis
		for id := int64(1); id <= 5; id++ {
			var at int64
			var actor, action, source, key, reason, previous string
			if err := raw.QueryRow(`SELECT at, actor, action, source, key, reason, previous_state FROM audit_log WHERE id = ?`, id).
				Scan(&at, &actor, &action, &source, &key, &reason, &previous); err != nil {
				t.Fatal(err)
			}
			prev = refHash(prev, id, at, actor, action, source, key, reason, previous)
			rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET hash = '%s' WHERE id = %d`, prev, id))
		}
		if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Break != nil {
			t.Fatalf("without the anchor: %+v, %v; want intact (a full recomputation)", c, err)
		}
		c, err := db.VerifyAudit(ctx, anchor)
		if err != nil || c.Break == nil || c.Break.ID != 5 || c.Break.Kind != storage.AuditRewritten {
			t.Fatalf("with the anchor: %+v, %v; want rewritten at row 5", c, err)
		}
		t.Log(c.Break.Detail)
	})
	t.Run("GapRecomputed", func(t *testing.T) {
		db, path := auditFixture(t, 5)
		log, err := db.AuditLog(ctx, 4, 1)
		if err != nil || len(log) != 1 || log[0].ID != 3 {
			t.Fatal(log, err)
		}
		anchor := storage.AuditAnchor{ID: 3, Hash: log[0].Hash}
		raw := rawDB(t, path)
		rawExec(t, raw, `DELETE FROM audit_log WHERE id = 3`)
		prev := log[0].Hash
		if err := raw.QueryRow(`SELECT hash FROM audit_log WHERE id = 2`).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{4, 5} {
			var at int64
			var actor, action, source, key, reason, previous string
			if err := raw.QueryRow(`SELECT at, actor, action, source, key, reason, previous_state FROM audit_log WHERE id = ?`, id).
				Scan(&at, &actor, &action, &source, &key, &reason, &previous); err != nil {
				t.Fatal(err)
			}
			prev = refHash(prev, id, at, actor, action, source, key, reason, previous)
			rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET hash = '%s' WHERE id = %d`, prev, id))
		}
		// The ids tell, even with the hashes recomputed.
		if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Break == nil || c.Break.Kind != storage.AuditDeleted {
			t.Fatalf("without the anchor: %+v, %v; want the gap found", c, err)
		}
		c, err := db.VerifyAudit(ctx, anchor)
		if err != nil || c.Break == nil || c.Break.ID != 4 || c.Break.Kind != storage.AuditDeleted || c.LastID != 2 {
			t.Fatalf("with the anchor: %+v, %v; want the gap before row 4", c, err)
		}
		t.Log(c.Break.Detail)
	})
	t.Run("CutAtTheEnd", func(t *testing.T) {
		db, path := auditFixture(t, 5)
		anchor := storage.AuditAnchor{ID: 5}
		log, err := db.AuditLog(ctx, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		anchor.Hash = log[0].Hash
		if c, err := db.VerifyAudit(ctx, anchor); err != nil || c.Break != nil || c.Rows != 5 {
			t.Fatalf("intact with its anchor: %+v, %v", c, err)
		}
		rawExec(t, rawDB(t, path), `DELETE FROM audit_log WHERE id >= 4`)
		if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Break != nil {
			t.Fatalf("without the anchor: %+v, %v; want intact (the end cut)", c, err)
		}
		c, err := db.VerifyAudit(ctx, anchor)
		if err != nil || c.Break == nil || c.Break.ID != 5 || c.Break.Kind != storage.AuditDeleted || c.LastID != 3 {
			t.Fatalf("with the anchor: %+v, %v; want row 5 deleted", c, err)
		}
		t.Log(c.Break.Detail)
	})
}

// TestAuditChain_Migration upgrades a database whose audit log predates the chain: its
// rows are chained in id order, and the rows written after join the chain.
func TestAuditChain_Migration(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 4)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	rawExec(t, raw,
		`ALTER TABLE audit_log DROP COLUMN hash`,
		`DELETE FROM migrations WHERE name LIKE '%0016_%'`,
		// A row written by hand before the upgrade is part of the history too.
		`INSERT INTO audit_log (at, actor, action, reason) VALUES (1700000000000, 'root', 'note', 'by hand')`)
	raw.Close()

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret"}); err != nil {
		t.Fatal(err)
	}
	c, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break != nil || c.Rows != 6 || c.LastID != 6 {
		t.Fatalf("after the upgrade: %+v, %v; want 6 rows chained", c, err)
	}
	log, err := db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	prev := storage.AuditGenesis
	for i := len(log) - 1; i >= 0; i-- {
		e := log[i]
		if h := refHash(prev, e.ID, e.At.UnixMilli(), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState); h != e.Hash {
			t.Fatalf("row %d: hash %q, recomputed %s", e.ID, e.Hash, h)
		}
		prev = e.Hash
	}
}

// writeAuditRows writes rows 1 to n of an audit log as insertAudit writes them, in one
// transaction: quicker than n of its own. It returns the last row's hash.
func writeAuditRows(t *testing.T, raw *sql.DB, n int64) string {
	t.Helper()
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	prev := storage.AuditGenesis
	for id := int64(1); id <= n; id++ {
		prev = refHash(prev, id, 1767225600000+id, "ana", "test", "", "", fmt.Sprint(id), "")
		if _, err := tx.Exec(`INSERT INTO audit_log (id, at, actor, action, reason, hash) VALUES (?, ?, 'ana', 'test', ?, ?)`,
			id, 1767225600000+id, fmt.Sprint(id), prev); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return prev
}

// TestAuditChain_Bounded: the console's check goes on from where the last one stopped,
// a bounded number of rows at a time, and starts over when the row it stopped at changed.
func TestAuditChain_Bounded(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 0)
	raw := rawDB(t, path)
	n := int64(sqlite.AuditCheckBatch + 5)
	prev := writeAuditRows(t, raw, n)
	c, err := db.AuditChain(ctx)
	if err != nil || c.Break != nil || !c.More || c.LastID != sqlite.AuditCheckBatch || c.Rows != sqlite.AuditCheckBatch {
		t.Fatalf("first check: %+v, %v; want %d rows and more", c, err, sqlite.AuditCheckBatch)
	}
	c, err = db.AuditChain(ctx)
	if err != nil || c.Break != nil || c.More || c.LastID != n || c.Rows != n || c.LastHash != prev {
		t.Fatalf("second check: %+v, %v; want all %d rows", c, err, n)
	}
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret"}); err != nil {
		t.Fatal(err)
	}
	// A row past the mark edited: found at once, and the chain found intact again once
	// the row is put back.
	rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET reason = 'x' WHERE id = %d`, n+1))
	if c, err = db.AuditChain(ctx); err != nil || c.Break == nil || c.Break.ID != n+1 || c.LastID != n {
		t.Fatalf("after an edit past the mark: %+v, %v", c, err)
	}
	rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET reason = '' WHERE id = %d`, n+1))
	if c, err = db.AuditChain(ctx); err != nil || c.Break != nil || c.LastID != n+1 || c.Rows != n+1 {
		t.Fatalf("after the row was put back: %+v, %v", c, err)
	}
	// An edit below the mark, and the mark's own hash changed: the check starts over
	// from the genesis and finds the edit.
	rawExec(t, raw, `UPDATE audit_log SET reason = 'x' WHERE id = 10`,
		fmt.Sprintf(`UPDATE audit_log SET hash = '%s' WHERE id = %d`, strings.Repeat("0", 64), n+1))
	if c, err = db.AuditChain(ctx); err != nil || c.Break == nil || c.Break.ID != 10 || c.LastID != 9 || c.Rows != 9 {
		t.Fatalf("after a change under the mark: %+v, %v; want the break at row 10", c, err)
	}
}

// TestAuditChain_Backup: a backup holds the chain as it was, verifiable on its own; a
// backup taken before the chain existed is chained when it is restored.
func TestAuditChain_Backup(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 5)
	want, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || want.Break != nil {
		t.Fatal(want, err)
	}
	copyPath := filepath.Join(filepath.Dir(path), "copy.db")
	if _, err := db.Backup(ctx, copyPath); err != nil {
		t.Fatal(err)
	}
	cp := storagetest.OpenPath(t, copyPath, sqlite.Options{MustExist: true})
	got, err := cp.VerifyAudit(ctx, storage.AuditAnchor{ID: want.LastID, Hash: want.LastHash})
	if err != nil || got != want {
		t.Fatalf("the backup's chain: %+v, %v; want %+v", got, err, want)
	}

	// A backup from before the chain, restored over the database: chained on the way in.
	old := filepath.Join(filepath.Dir(path), "old.db")
	if _, err := db.Backup(ctx, old); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, old)
	rawExec(t, raw, `ALTER TABLE audit_log DROP COLUMN hash`, `DELETE FROM migrations WHERE name LIKE '%0016_%'`,
		`PRAGMA wal_checkpoint(TRUNCATE)`)
	raw.Close()
	live := filepath.Join(t.TempDir(), "hookdedup.db")
	if _, err := sqlite.Restore(ctx, old, live); err != nil {
		t.Fatal(err)
	}
	restored := storagetest.OpenPath(t, live, sqlite.Options{MustExist: true})
	if got, err := restored.VerifyAudit(ctx, storage.AuditAnchor{ID: want.LastID, Hash: want.LastHash}); err != nil || got != want {
		t.Fatalf("the restored chain: %+v, %v; want %+v", got, err, want)
	}
}
