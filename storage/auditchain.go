package storage

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
