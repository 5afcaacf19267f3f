package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"sync"
)

// AuditFormat is the version tag hashed into every row, and the name of the encoding.
const AuditFormat = "hookdedup audit v1"

// AuditGenesis is the hash that the first row of the audit log chains from.
const AuditGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// The kinds of AuditBreak.
const (
	// AuditEdited: a row's content, or its hash, was changed.
	AuditEdited = "edited"
	// AuditDeleted: rows are missing.
	AuditDeleted = "deleted"
	// AuditInserted: a row was added other than by hookdedup's audit writer.
	AuditInserted = "inserted"
	// AuditReordered: two rows are in each other's place.
	AuditReordered = "reordered"
	// AuditRewritten: the chain holds, but not through the anchor: it was recomputed.
	AuditRewritten = "rewritten"
	// AuditBroken: the chain breaks in a way none of the others describes.
	AuditBroken = "broken"
)

// AuditBreak is where the audit chain breaks first, and how.
type AuditBreak struct {
	// ID is the row the chain breaks at: the first one that does not chain from the
	// row before it (for a deletion, the row after the gap).
	ID int64
	// Kind is one of AuditEdited, AuditDeleted, AuditInserted, AuditReordered,
	// AuditRewritten and AuditBroken: the likeliest change that leaves what was found.
	Kind string
	// Detail says what was found, naming the rows.
	Detail string
}

// AuditAnchor is a row of the audit log and the hash it had, noted from an earlier
// check (its LastID and LastHash) or export: the chain must still pass through it. The
// chain alone cannot show a log rewritten whole with hashes recomputed, nor rows
// deleted from its end; an anchor kept outside the database can.
type AuditAnchor struct {
	ID   int64
	Hash string
}

// AuditCheck is the outcome of a check of the audit chain.
type AuditCheck struct {
	// Rows is how many rows were found to chain, from the genesis.
	Rows int64
	// LastID and LastHash are the last row found to chain (0 and AuditGenesis when
	// none): everything up to it is as it was written.
	LastID   int64
	LastHash string
	// Break is where the chain breaks; nil if it does not (up to LastID).
	Break *AuditBreak
	// More says that a bounded check (AuditChain) stopped before the end of the log:
	// the rows after LastID are not checked yet.
	More bool
}

// The audit log is a hash chain: each row's hash covers the hash of the row before it
// and the row's own content, so that a row edited, deleted, inserted or moved breaks
// the chain at that row. The encoding is fixed here, byte for byte, so that an auditor
// can recompute every hash from an export without hookdedup:
//
//	hash(row) = lowercase hex of SHA-256( field(prev) ‖ field("hookdedup audit v1") ‖
//	            field(id) ‖ field(at) ‖ field(actor) ‖ field(action) ‖ field(source) ‖
//	            field(key) ‖ field(reason) ‖ field(previous_state) )
//	field(v)  = len(v) as an 8-byte big-endian unsigned integer ‖ v
//
// where prev is the previous row's hash as stored (64 hex digits; AuditGenesis for the
// first row), id and at (milliseconds since the Unix epoch, as stored) are written in
// decimal ASCII, and every text is its UTF-8 bytes as stored. The length in front of
// every field makes the encoding unambiguous whatever the text holds; "previous" is the
// row with the next lower id.
//
// A column added to audit_log later goes into the encoding as a field appended after
// previous_state, under a new version tag, only for rows where it is not empty: older
// rows keep the hashes they were given.

// AuditHash returns the hash of e chained after prev. Every engine writes its rows
// with it, and every check recomputes it.
func AuditHash(prev string, e AuditEntry) string {
	h := sha256.New()
	var n [8]byte
	for _, v := range []string{prev, AuditFormat, strconv.FormatInt(e.ID, 10), strconv.FormatInt(e.At.UnixMilli(), 10),
		e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState} {
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AuditPos is a point of the audit chain: a row that chains, its hash, and how many rows
// chain up to it from the genesis. The zero AuditPos, like AuditStart, is the genesis.
type AuditPos struct {
	ID   int64
	Hash string
	Rows int64
}

// AuditMark is how far a console's bounded checks of the audit chain (AuditChain) have
// gone. It is kept in memory, each process its own, not in the database: a mark stored
// beside the rows could be forged with them. Its zero value is the genesis.
type AuditMark struct {
	mu  sync.Mutex
	pos AuditPos
	// anchor is the mark's row as it was checked, once that row was found changed or
	// gone: until a check passes through it again, every check starts from the genesis
	// and must find it. Nothing hookdedup does changes or removes a row while it runs
	// (a restore needs serve stopped), so a row gone from under the mark, or chaining
	// under another hash, is the log rewritten or cut, and it stays on the page.
	anchor AuditAnchor
}

// Next runs the next bounded check from m: hashOf reads the hash of the audit row id
// (ok false when there is none), and check checks the chain from a point, through an
// anchor unless its Hash is empty. Each call goes on from the last row found to chain,
// once that row still has the hash it was checked with.
func (m *AuditMark) Next(hashOf func(id int64) (hash string, ok bool, err error),
	check func(from AuditPos, anchor AuditAnchor) (AuditCheck, error)) (AuditCheck, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	from := m.pos
	if from.Rows == 0 {
		from = AuditStart
	} else {
		hash, ok, err := hashOf(from.ID)
		if err != nil {
			return AuditCheck{}, err
		}
		if !ok || hash != from.Hash {
			if m.anchor.Hash == "" {
				m.anchor = AuditAnchor{ID: from.ID, Hash: from.Hash}
			}
			from = AuditStart
		}
	}
	c, err := check(from, m.anchor)
	if err != nil {
		return AuditCheck{}, err
	}
	m.pos = AuditPos{ID: c.LastID, Hash: c.LastHash, Rows: c.Rows}
	if c.Break == nil && c.More && m.anchor.Hash != "" && c.LastID < m.anchor.ID {
		// The bounded check has not reached the anchor's row yet (a log longer than
		// one check): what it finds there is told now, not once the checks get there.
		hash, ok, err := hashOf(m.anchor.ID)
		if err != nil {
			return AuditCheck{}, err
		}
		switch {
		case !ok:
			c.Break = &AuditBreak{ID: m.anchor.ID, Kind: AuditDeleted, Detail: fmt.Sprintf(
				"row %d, which this server had found in the chain, is gone: rows were deleted, or the database was restored from an older backup",
				m.anchor.ID)}
		case hash != m.anchor.Hash:
			c.Break = &AuditBreak{ID: m.anchor.ID, Kind: AuditRewritten, Detail: fmt.Sprintf(
				"row %d's hash is %s, not the %s this server had found in the chain: the chain up to it was rewritten",
				m.anchor.ID, hash, m.anchor.Hash)}
		}
	}
	if c.Break == nil && m.anchor.Hash != "" && c.Rows > 0 && c.LastID >= m.anchor.ID {
		m.anchor = AuditAnchor{}
	}
	return c, nil
}

// Forget takes m back to the genesis, as a restart does.
func (m *AuditMark) Forget() {
	m.mu.Lock()
	m.pos, m.anchor = AuditPos{}, AuditAnchor{}
	m.mu.Unlock()
}

// AuditStart is the genesis, where a check of the whole chain starts.
var AuditStart = AuditPos{Hash: AuditGenesis}

// After is the id after which the rows to check from p begin: from the genesis, every
// row, whatever its id (a row inserted with id 0 or below is a break to find, not to
// skip).
func (p AuditPos) After() int64 {
	if p.Rows == 0 {
		return math.MinInt64
	}
	return p.ID
}

// CheckAudit checks the audit chain from from on, for every engine: rows yields the
// log's rows with an id above from.After(), in id order, all of one snapshot, or an
// error that ends the check. It checks at most limit rows (0: all of them), and so reads
// limit+1 at most (the row after the last tells More, and how a break came); it stops
// reading as soon as it knows the answer. It checks that the chain passes through
// anchor, unless anchor.Hash is empty. A break comes back in the AuditCheck; the error
// is rows' own.
func CheckAudit(from AuditPos, limit int, anchor AuditAnchor, rows iter.Seq2[AuditEntry, error]) (AuditCheck, error) {
	if from.Hash == "" && from.Rows == 0 {
		from = AuditStart
	}
	next, stop := iter.Pull2(rows)
	defer stop()
	read := func() (*AuditEntry, error) {
		e, err, ok := next()
		if !ok {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &e, nil
	}
	result := func(pos AuditPos) AuditCheck {
		return AuditCheck{Rows: pos.Rows, LastID: pos.ID, LastHash: pos.Hash}
	}
	var before *AuditPos // the point before pos, once there is one
	pos := from
	for n := 0; ; n++ {
		cur, err := read()
		if err != nil {
			return AuditCheck{}, err
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
		if AuditHash(pos.Hash, *cur) != cur.Hash {
			next, err := read()
			if err != nil {
				return AuditCheck{}, err
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
			c.Break = &AuditBreak{ID: cur.ID, Kind: AuditRewritten, Detail: fmt.Sprintf(
				"row %d chains, but its hash is %s, not the anchor's %s: the chain up to row %d was rewritten and its hashes recomputed",
				cur.ID, cur.Hash, anchor.Hash, cur.ID)}
			return c, nil
		}
		p := pos
		before = &p
		pos = AuditPos{ID: cur.ID, Hash: cur.Hash, Rows: pos.Rows + 1}
	}
}

// idGap is the break of a row that chains from pos, but with an id that does not
// follow pos's: the engines' audit writers give each row the next id, so rows before it were deleted
// (and its hash recomputed), or it was inserted before the first.
func idGap(pos AuditPos, cur AuditEntry) *AuditBreak {
	switch {
	case pos.Rows == 0 && cur.ID < 1:
		return &AuditBreak{ID: cur.ID, Kind: AuditInserted, Detail: fmt.Sprintf(
			"row %d comes before row 1, where the log begins: it was inserted", cur.ID)}
	case cur.ID > pos.ID+1:
		from := "the genesis"
		if pos.Rows > 0 {
			from = fmt.Sprintf("row %d", pos.ID)
		}
		return &AuditBreak{ID: cur.ID, Kind: AuditDeleted, Detail: fmt.Sprintf(
			"%s missing: row %d chains from %s, its hash recomputed after the deletion", rowRange(pos.ID+1, cur.ID-1), cur.ID, from)}
	}
	return nil
}

// missingAnchor is the break of a chain that does not hold the anchor's row: cur is the
// first row past it, nil at the end of the log.
func missingAnchor(anchor AuditAnchor, last AuditPos, cur *AuditEntry) *AuditBreak {
	if cur == nil {
		end := fmt.Sprintf("the log ends at row %d", last.ID)
		if last.Rows == 0 {
			end = "the log is empty"
		}
		return &AuditBreak{ID: anchor.ID, Kind: AuditDeleted, Detail: fmt.Sprintf(
			"%s, before the anchor's row %d: rows at its end were deleted, or the database was restored from a backup older than the anchor",
			end, anchor.ID)}
	}
	return &AuditBreak{ID: anchor.ID, Kind: AuditDeleted, Detail: fmt.Sprintf(
		"row %d, the anchor's, is gone (the chain goes from row %d to row %d): it was deleted and the chain after it recomputed",
		anchor.ID, last.ID, cur.ID)}
}

// classifyBreak says how the chain came to break at cur, which does not chain from pos
// (before is the point before pos; nil when pos is the genesis or the first point
// checked), from the hashes that still agree around it: each case is the change that
// leaves exactly what was found. next is the row after cur, nil at the end.
func classifyBreak(before *AuditPos, pos AuditPos, cur AuditEntry, next *AuditEntry) AuditBreak {
	chains := func(prev string, e AuditEntry) bool { return AuditHash(prev, e) == e.Hash }
	as := func(e AuditEntry, id int64) AuditEntry { e.ID = id; return e }
	name := func(p AuditPos) string {
		if p.Hash == AuditGenesis && p.Rows == 0 {
			return "the genesis"
		}
		return fmt.Sprintf("row %d", p.ID)
	}
	prevRow := name(pos)
	brk := func(id int64, kind, format string, args ...any) AuditBreak {
		return AuditBreak{ID: id, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case cur.Hash == "":
		return brk(cur.ID, AuditInserted, "row %d has no hash: it was added outside hookdedup's audit writer", cur.ID)
	case !isAuditHash(cur.Hash):
		return brk(cur.ID, AuditEdited, "row %d's hash was changed: %q is not a SHA-256 digest", cur.ID, cur.Hash)
	case before != nil && chains(before.Hash, cur):
		return brk(pos.ID, AuditInserted, "row %d was inserted: row %d chains from %s", pos.ID, cur.ID, name(*before))
	case before != nil && chains(before.Hash, as(cur, pos.ID)):
		return brk(pos.ID, AuditInserted, "row %d was inserted and the rows after it renumbered: row %d chains from %s as row %d",
			pos.ID, cur.ID, name(*before), pos.ID)
	}
	if next != nil {
		switch {
		// The two rows moved with their hashes, or their contents moved and the hashes
		// stayed.
		case chains(pos.Hash, as(*next, cur.ID)) && chains(next.Hash, as(cur, next.ID)),
			AuditHash(pos.Hash, as(*next, cur.ID)) == cur.Hash && AuditHash(cur.Hash, as(cur, next.ID)) == next.Hash:
			return brk(cur.ID, AuditReordered, "row %d and row %d were swapped: each chains from the other's place", cur.ID, next.ID)
		case chains(pos.Hash, *next):
			return brk(cur.ID, AuditInserted, "row %d was inserted: row %d chains from %s", cur.ID, next.ID, prevRow)
		case chains(pos.Hash, as(*next, cur.ID)):
			return brk(cur.ID, AuditInserted, "row %d was inserted and the rows after it renumbered: row %d chains from %s as row %d",
				cur.ID, next.ID, prevRow, cur.ID)
		}
	}
	if cur.ID > pos.ID+1 {
		return brk(cur.ID, AuditDeleted, "%s missing: row %d does not chain from %s", rowRange(pos.ID+1, cur.ID-1), cur.ID, prevRow)
	}
	if next != nil {
		switch {
		case chains(cur.Hash, *next):
			return brk(cur.ID, AuditEdited,
				"row %d was edited: its content no longer matches its hash, which row %d chains from (or %s was edited and its hash recomputed)",
				cur.ID, next.ID, prevRow)
		case chains(cur.Hash, as(*next, next.ID+1)):
			return brk(cur.ID, AuditDeleted, "a row before row %d was deleted and the rows after it renumbered: row %d chains from row %d as row %d",
				cur.ID, next.ID, cur.ID, next.ID+1)
		}
		if chains(AuditHash(pos.Hash, cur), *next) {
			// Its content chains from the row before, and the next row from the hash it
			// would have: only the hash it holds was changed.
			return brk(cur.ID, AuditEdited, "row %d's hash was changed: its content chains from %s, and row %d from the hash row %d should have",
				cur.ID, prevRow, next.ID, cur.ID)
		}
		return brk(cur.ID, AuditBroken, "row %d does not chain from %s, nor row %d from row %d: rows around row %d were changed",
			cur.ID, prevRow, next.ID, cur.ID, cur.ID)
	}
	return brk(cur.ID, AuditEdited, "row %d, the last, does not chain from %s: it was edited, or added outside hookdedup's audit writer",
		cur.ID, prevRow)
}

// rowRange names the rows from a to b.
func rowRange(a, b int64) string {
	if a == b {
		return fmt.Sprintf("row %d is", a)
	}
	return fmt.Sprintf("rows %d to %d are", a, b)
}

// isAuditHash says whether s is a hash as AuditHash writes it.
func isAuditHash(s string) bool {
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
