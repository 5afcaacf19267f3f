package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/hookdedup/hookdedup/storage"
)

// chainAuditLog gives every row already in the audit log its hash, in id order from
// the genesis. It runs once, in the transaction of the migration that adds the column,
// so rows written before the chain existed join it; a row found later without a hash
// was not written by insertAudit, and verification says so.
func chainAuditLog(ctx context.Context, tx *sql.Tx) error {
	prev, after := storage.AuditGenesis, int64(math.MinInt64)
	for {
		// In batches: the statement reading rows is closed before the updates.
		rows, err := tx.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT 500`, after)
		if err != nil {
			return fmt.Errorf("chain the audit log: %w", err)
		}
		var batch []storage.AuditEntry
		for rows.Next() {
			e, err := scanAudit(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("chain the audit log: %w", err)
			}
			batch = append(batch, e)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("chain the audit log: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, e := range batch {
			prev = storage.AuditHash(prev, e)
			if _, err := tx.ExecContext(ctx, `UPDATE audit_log SET hash = ? WHERE id = ?`, prev, e.ID); err != nil {
				return fmt.Errorf("chain the audit log: row %d: %w", e.ID, err)
			}
		}
		after = batch[len(batch)-1].ID
	}
}

// VerifyAudit checks the whole audit chain, from the genesis, in one read snapshot, and
// that it passes through anchor unless anchor.Hash is empty. A break comes back in the
// AuditCheck, not as an error; the error is for a check that could not be made.
func (db *DB) VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	c, err := checkChain(ctx, db.read, chainPos{Hash: storage.AuditGenesis}, 0, anchor)
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("verify the audit log: %w", err)
	}
	return c, nil
}

// auditCheckBatch bounds the rows one AuditChain call checks, and so what it adds to a
// page once per that many new rows: 60 to 140 ms on a 2-core machine under heavy load
// (BenchmarkVerifyAudit, about 7 to 14 µs a row, most of it SQLite's). A call with
// nothing new to check costs one lookup, about 50 µs.
const auditCheckBatch = 10000

// auditMark is how far AuditChain has checked the chain. It is kept in memory, not in
// the database: a mark stored beside the rows could be forged with them.
type auditMark struct {
	mu  sync.Mutex
	pos chainPos
}

// AuditChain reports the state of the audit chain for the console, checking only what
// the calls before it have not: each call goes on from the last row found to chain (held
// in memory, from the genesis at start), after making sure that row still has the hash
// it was checked with, and checks auditCheckBatch rows at most (More then says rows are
// left for the next call). A change to the rows below that mark that leaves the mark's
// own hash alone (a row edited, its hash kept) shows only to VerifyAudit, or after a
// restart; an anchor check of the mark's row catches every rewrite of the chain up to it.
func (db *DB) AuditChain(ctx context.Context) (storage.AuditCheck, error) {
	db.auditMark.mu.Lock()
	defer db.auditMark.mu.Unlock()
	from := db.auditMark.pos
	if from.ID == 0 {
		from = chainPos{Hash: storage.AuditGenesis}
	} else {
		var hash string
		err := db.read.QueryRowContext(ctx, `SELECT hash FROM audit_log WHERE id = ?`, from.ID).Scan(&hash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return storage.AuditCheck{}, fmt.Errorf("audit chain: %w", err)
		}
		if hash != from.Hash {
			from = chainPos{Hash: storage.AuditGenesis} // changed under the mark: from the start again
		}
	}
	c, err := checkChain(ctx, db.read, from, auditCheckBatch, storage.AuditAnchor{})
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("audit chain: %w", err)
	}
	db.auditMark.pos = chainPos{ID: c.LastID, Hash: c.LastHash, Rows: c.Rows}
	return c, nil
}

// chainPos is a point of the chain: a row that chains, its hash, and how many rows
// chain up to it from the genesis.
type chainPos struct {
	ID   int64
	Hash string
	Rows int64
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkChain checks the rows after from, in id order: at most limit of them (0: all),
// all read by one statement (one snapshot). It checks that the chain passes through
// anchor, unless anchor.Hash is empty.
func checkChain(ctx context.Context, q queryer, from chainPos, limit int, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	sqlLimit := -1
	if limit > 0 {
		sqlLimit = limit + 1 // the row after the last: for More, and to tell how a break came
	}
	after := from.ID
	if from.Rows == 0 {
		after = math.MinInt64 // from the genesis: every row, whatever its id
	}
	rows, err := q.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT ?`, after, sqlLimit)
	if err != nil {
		return storage.AuditCheck{}, err
	}
	defer rows.Close()
	read := func() (*storage.AuditEntry, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		e, err := scanAudit(rows)
		return &e, err
	}
	result := func(pos chainPos) storage.AuditCheck {
		return storage.AuditCheck{Rows: pos.Rows, LastID: pos.ID, LastHash: pos.Hash}
	}
	var before *chainPos // the point before pos, once there is one
	pos := from
	for n := 0; ; n++ {
		cur, err := read()
		if err != nil {
			return storage.AuditCheck{}, err
		}
		// Whether the anchor's row is still ahead: not yet passed.
		anchorAhead := anchor.Hash != "" && (pos.Rows == 0 || pos.ID < anchor.ID)
		if cur == nil {
			c := result(pos)
			if anchorAhead {
				c.Break = missingAnchor(anchor, pos, nil)
			}
			return c, nil
		}
		if limit > 0 && n == limit {
			c := result(pos)
			c.More = true
			return c, nil
		}
		if storage.AuditHash(pos.Hash, *cur) != cur.Hash {
			next, err := read()
			if err != nil {
				return storage.AuditCheck{}, err
			}
			c := result(pos)
			brk := classifyBreak(before, pos, *cur, next)
			if brk.ID < cur.ID {
				// The row before cur is the one that does not belong: the chain holds
				// only up to the row before that.
				c = result(*before)
			}
			c.Break = &brk
			return c, nil
		}
		if gap := idGap(pos, *cur); gap != nil {
			c := result(pos)
			c.Break = gap
			return c, nil
		}
		if anchorAhead && cur.ID > anchor.ID {
			c := result(pos)
			c.Break = missingAnchor(anchor, pos, cur)
			return c, nil
		}
		if anchor.Hash != "" && cur.ID == anchor.ID && cur.Hash != anchor.Hash {
			c := result(pos)
			c.Break = &storage.AuditBreak{ID: cur.ID, Kind: storage.AuditRewritten, Detail: fmt.Sprintf(
				"row %d chains, but its hash is %s, not the anchor's %s: the chain up to row %d was rewritten and its hashes recomputed",
				cur.ID, cur.Hash, anchor.Hash, cur.ID)}
			return c, nil
		}
		p := pos
		before = &p
		pos = chainPos{ID: cur.ID, Hash: cur.Hash, Rows: pos.Rows + 1}
	}
}

// idGap is the break of a row that chains from pos, but with an id that does not
// follow pos's: insertAudit gives each row the next id, so rows before it were deleted
// (and its hash recomputed), or it was inserted before the first.
func idGap(pos chainPos, cur storage.AuditEntry) *storage.AuditBreak {
	switch {
	case pos.Rows == 0 && cur.ID < 1:
		return &storage.AuditBreak{ID: cur.ID, Kind: storage.AuditInserted, Detail: fmt.Sprintf(
			"row %d comes before row 1, where the log begins: it was inserted", cur.ID)}
	case cur.ID > pos.ID+1:
		from := "the genesis"
		if pos.Rows > 0 {
			from = fmt.Sprintf("row %d", pos.ID)
		}
		return &storage.AuditBreak{ID: cur.ID, Kind: storage.AuditDeleted, Detail: fmt.Sprintf(
			"%s missing: row %d chains from %s, its hash recomputed after the deletion", rowRange(pos.ID+1, cur.ID-1), cur.ID, from)}
	}
	return nil
}

// missingAnchor is the break of a chain that does not hold the anchor's row: cur is the
// first row past it, nil at the end of the log.
func missingAnchor(anchor storage.AuditAnchor, last chainPos, cur *storage.AuditEntry) *storage.AuditBreak {
	if cur == nil {
		end := fmt.Sprintf("the log ends at row %d", last.ID)
		if last.Rows == 0 {
			end = "the log is empty"
		}
		return &storage.AuditBreak{ID: anchor.ID, Kind: storage.AuditDeleted, Detail: fmt.Sprintf(
			"%s, before the anchor's row %d: rows at its end were deleted, or the database was restored from a backup older than the anchor",
			end, anchor.ID)}
	}
	return &storage.AuditBreak{ID: anchor.ID, Kind: storage.AuditDeleted, Detail: fmt.Sprintf(
		"row %d, the anchor's, is gone (the chain goes from row %d to row %d): it was deleted and the chain after it recomputed",
		anchor.ID, last.ID, cur.ID)}
}

// classifyBreak says how the chain came to break at cur, which does not chain from pos
// (before is the point before pos; nil when pos is the genesis or the first point
// checked), from the hashes that still agree around it: each case is the change that
// leaves exactly what was found. next is the row after cur, nil at the end.
func classifyBreak(before *chainPos, pos chainPos, cur storage.AuditEntry, next *storage.AuditEntry) storage.AuditBreak {
	chains := func(prev string, e storage.AuditEntry) bool { return storage.AuditHash(prev, e) == e.Hash }
	as := func(e storage.AuditEntry, id int64) storage.AuditEntry { e.ID = id; return e }
	name := func(p chainPos) string {
		if p.Hash == storage.AuditGenesis && p.Rows == 0 {
			return "the genesis"
		}
		return fmt.Sprintf("row %d", p.ID)
	}
	prevRow := name(pos)
	brk := func(id int64, kind, format string, args ...any) storage.AuditBreak {
		return storage.AuditBreak{ID: id, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case cur.Hash == "":
		return brk(cur.ID, storage.AuditInserted, "row %d has no hash: it was added outside hookdedup's audit writer", cur.ID)
	case !isAuditHash(cur.Hash):
		return brk(cur.ID, storage.AuditEdited, "row %d's hash was changed: %q is not a SHA-256 digest", cur.ID, cur.Hash)
	case before != nil && chains(before.Hash, cur):
		return brk(pos.ID, storage.AuditInserted, "row %d was inserted: row %d chains from %s", pos.ID, cur.ID, name(*before))
	case before != nil && chains(before.Hash, as(cur, pos.ID)):
		return brk(pos.ID, storage.AuditInserted, "row %d was inserted and the rows after it renumbered: row %d chains from %s as row %d",
			pos.ID, cur.ID, name(*before), pos.ID)
	}
	if next != nil {
		switch {
		// The two rows moved with their hashes, or their contents moved and the hashes
		// stayed.
		case chains(pos.Hash, as(*next, cur.ID)) && chains(next.Hash, as(cur, next.ID)),
			storage.AuditHash(pos.Hash, as(*next, cur.ID)) == cur.Hash && storage.AuditHash(cur.Hash, as(cur, next.ID)) == next.Hash:
			return brk(cur.ID, storage.AuditReordered, "row %d and row %d were swapped: each chains from the other's place", cur.ID, next.ID)
		case chains(pos.Hash, *next):
			return brk(cur.ID, storage.AuditInserted, "row %d was inserted: row %d chains from %s", cur.ID, next.ID, prevRow)
		case chains(pos.Hash, as(*next, cur.ID)):
			return brk(cur.ID, storage.AuditInserted, "row %d was inserted and the rows after it renumbered: row %d chains from %s as row %d",
				cur.ID, next.ID, prevRow, cur.ID)
		}
	}
	if cur.ID > pos.ID+1 {
		return brk(cur.ID, storage.AuditDeleted, "%s missing: row %d does not chain from %s", rowRange(pos.ID+1, cur.ID-1), cur.ID, prevRow)
	}
	if next != nil {
		switch {
		case chains(cur.Hash, *next):
			return brk(cur.ID, storage.AuditEdited,
				"row %d was edited: its content no longer matches its hash, which row %d chains from (or %s was edited and its hash recomputed)",
				cur.ID, next.ID, prevRow)
		case chains(cur.Hash, as(*next, next.ID+1)):
			return brk(cur.ID, storage.AuditDeleted, "a row before row %d was deleted and the rows after it renumbered: row %d chains from row %d as row %d",
				cur.ID, next.ID, cur.ID, next.ID+1)
		}
		return brk(cur.ID, storage.AuditBroken, "row %d does not chain from %s, nor row %d from row %d: rows around row %d were changed",
			cur.ID, prevRow, next.ID, cur.ID, cur.ID)
	}
	return brk(cur.ID, storage.AuditEdited, "row %d, the last, does not chain from %s: it was edited, or added outside hookdedup's audit writer",
		cur.ID, prevRow)
}

// rowRange names the rows from a to b.
func rowRange(a, b int64) string {
	if a == b {
		return fmt.Sprintf("row %d is", a)
	}
	return fmt.Sprintf("rows %d to %d are", a, b)
}

// isAuditHash says whether s is a hash as auditHash writes it.
func isAuditHash(s string) bool {
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
