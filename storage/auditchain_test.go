package storage_test

import (
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// chain is n audit rows as the engines' writers chain them, ids 1 to n.
func chain(n int) []storage.AuditEntry {
	rows := make([]storage.AuditEntry, n)
	prev := storage.AuditGenesis
	for i := range rows {
		e := storage.AuditEntry{ID: int64(i + 1), At: time.UnixMilli(1767225600000 + int64(i)), Actor: "ana", Action: "release"}
		e.Hash = storage.AuditHash(prev, e)
		rows[i], prev = e, e.Hash
	}
	return rows
}

// yielding yields rows, then err if it is not nil, and counts the rows taken.
func yielding(rows []storage.AuditEntry, err error, taken *int) iter.Seq2[storage.AuditEntry, error] {
	return func(yield func(storage.AuditEntry, error) bool) {
		for _, e := range rows {
			*taken++
			if !yield(e, nil) {
				return
			}
		}
		if err != nil {
			yield(storage.AuditEntry{}, err)
		}
	}
}

// TestCheckAudit_Reads: a bounded check reads one row past its bound and no more, goes
// on from where the last one stopped, and a read that fails is an error, not a break.
func TestCheckAudit_Reads(t *testing.T) {
	rows := chain(10)
	var taken int
	c, err := storage.CheckAudit(storage.AuditStart, 4, storage.AuditAnchor{}, yielding(rows, nil, &taken))
	if err != nil || c.Break != nil || !c.More || c.Rows != 4 || c.LastID != 4 || c.LastHash != rows[3].Hash || taken != 5 {
		t.Fatalf("first 4: %+v, %v, %d rows read; want 4 chained, more, 5 read", c, err, taken)
	}
	from := storage.AuditPos{ID: c.LastID, Hash: c.LastHash, Rows: c.Rows}
	if from.After() != 4 || storage.AuditStart.After() >= 0 {
		t.Fatalf("After: %d from row 4, %d from the genesis", from.After(), storage.AuditStart.After())
	}
	taken = 0
	c, err = storage.CheckAudit(from, 0, storage.AuditAnchor{ID: 7, Hash: rows[6].Hash}, yielding(rows[4:], nil, &taken))
	if err != nil || c.Break != nil || c.More || c.Rows != 10 || c.LastID != 10 || taken != 6 {
		t.Fatalf("the rest: %+v, %v, %d rows read", c, err, taken)
	}

	failed := errors.New("connection lost")
	if _, err := storage.CheckAudit(storage.AuditStart, 0, storage.AuditAnchor{}, yielding(rows[:3], failed, &taken)); !errors.Is(err, failed) {
		t.Fatalf("a failed read: %v, want its error", err)
	}
	edited := chain(3)
	edited[1].Reason = "changed"
	c, err = storage.CheckAudit(storage.AuditPos{}, 0, storage.AuditAnchor{}, yielding(edited, nil, &taken))
	if err != nil || c.Break == nil || c.Break.Kind != storage.AuditEdited || c.Break.ID != 2 || c.LastID != 1 {
		t.Fatalf("an edited row: %+v (%+v), %v", c, c.Break, err)
	}
}
