package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// recomputeChain gives every row of the log the hash it would chain with from the
// genesis, as someone with the file and the documented encoding would after editing it.
func recomputeChain(t *testing.T, raw *sql.DB) {
	t.Helper()
	rows, err := raw.Query(`SELECT id, at, actor, action, source, key, reason, previous_state FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id, at                                       int64
		actor, action, source, key, reason, previous string
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.at, &r.actor, &r.action, &r.source, &r.key, &r.reason, &r.previous); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	rows.Close()
	prev := storage.AuditGenesis
	for _, r := range all {
		prev = refHash(prev, r.id, r.at, r.actor, r.action, r.source, r.key, r.reason, r.previous)
		rawExec(t, raw, fmt.Sprintf(`UPDATE audit_log SET hash = '%s' WHERE id = %d`, prev, r.id))
	}
}

// TestAuditChain_MarkRewrittenShows: the console's check (AuditChain) has seen row 5
// with its hash. Someone with the file then edits row 2 and recomputes every hash after
// it: the row serve saw chains under another hash, and the page says the log was
// rewritten, on every look after it too.
func TestAuditChain_MarkRewrittenShows(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 5)
	c, err := db.AuditChain(ctx)
	if err != nil || c.Break != nil || c.LastID != 5 {
		t.Fatalf("first look: %+v, %v", c, err)
	}
	raw := rawDB(t, path)
	rawExec(t, raw, `UPDATE audit_log SET reason = 'routine' WHERE id = 2`)
	recomputeChain(t, raw)
	c, err = db.AuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Break == nil {
		t.Fatalf("after row 2 was edited and every hash recomputed, under a mark at row 5 the console had checked: %+v; "+
			"want a break (rewritten at row 5): serve saw row 5 with another hash", c)
	}
	if c.Break.Kind != storage.AuditRewritten {
		t.Errorf("break %+v; want kind %q", c.Break, storage.AuditRewritten)
	}
	if again, err := db.AuditChain(ctx); err != nil || again.Break == nil || again.Break.Kind != storage.AuditRewritten {
		t.Errorf("the next look: %+v, %v; want the rewrite shown again", again, err)
	}
}

// TestAuditChain_MarkCutShows: the console's check has seen rows 1 to 5. Rows 4 and 5
// are then deleted from the file (the "reveal secret" rows nobody should know of).
// serve, which saw row 5, reports the rows gone, on every look after it too, and after
// a new row takes row 4's id.
func TestAuditChain_MarkCutShows(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 5)
	c, err := db.AuditChain(ctx)
	if err != nil || c.Break != nil || c.LastID != 5 {
		t.Fatalf("first look: %+v, %v", c, err)
	}
	rawExec(t, rawDB(t, path), `DELETE FROM audit_log WHERE id >= 4`)
	c, err = db.AuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Break == nil {
		t.Fatalf("after rows 4 and 5, which the console had checked, were deleted: %+v; want a break (deleted)", c)
	}
	if c.Break.Kind != storage.AuditDeleted {
		t.Errorf("break %+v; want kind %q", c.Break, storage.AuditDeleted)
	}
	if again, err := db.AuditChain(ctx); err != nil || again.Break == nil || again.Break.Kind != storage.AuditDeleted {
		t.Errorf("the next look: %+v, %v; want the deletion shown again", again, err)
	}
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "release", Source: "ota", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if again, err := db.AuditChain(ctx); err != nil || again.Break == nil {
		t.Errorf("after a new row: %+v, %v; want the cut still shown", again, err)
	}
}

// TestVerifyAudit_HashReplacedIsEdited: row 3's hash alone is replaced with another
// well-formed SHA-256 digest, its content left as it was. Row 4 still chains from the
// hash row 3 ought to have, so the change is exactly row 3's hash (AuditEdited), not
// rows around it.
func TestVerifyAudit_HashReplacedIsEdited(t *testing.T) {
	ctx := context.Background()
	db, path := auditFixture(t, 6)
	rawExec(t, rawDB(t, path), `UPDATE audit_log SET hash = '`+strings.Repeat("ab", 32)+`' WHERE id = 3`)
	c, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break == nil || c.Break.ID != 3 || c.LastID != 2 {
		t.Fatalf("%+v, %v; want a break at row 3", c, err)
	}
	if c.Break.Kind != storage.AuditEdited || !strings.Contains(c.Break.Detail, "hash") {
		t.Errorf("row 3's hash replaced, its content and row 4 untouched: %q: %s; want %q, naming row 3's hash",
			c.Break.Kind, c.Break.Detail, storage.AuditEdited)
	}
}
