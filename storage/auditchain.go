package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
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
