package storage

import (
	"crypto/sha256"
	"time"
)

// CorrelationKey is what one correlation rule reads of a delivery: the hash of its
// booking, amount and currency, and the rule's window.
type CorrelationKey struct {
	Rule   string
	Hash   string // hex SHA-256 of the canonical JSON of booking, amount and currency
	Window time.Duration
}

// KeyHash is the hash a key is traced under once its claim has expired.
func KeyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Probe is what the key lab asks of a payload it is shown: the flags a delivery of it
// would get now, were it accepted, and, were it a duplicate, what it would be compared
// with its first delivery on (PayloadHash for a mismatch; Amount, Currency and
// EventStatus, as a Delivery stores them, for a money mismatch).
type Probe struct {
	Source         string
	Key            string
	BusinessKey    string
	BusinessWindow time.Duration
	// BusinessBlocks: a business key found makes the delivery a duplicate of the one
	// found, handed nowhere and flagged as nothing else (business_key_blocks).
	BusinessBlocks bool
	Correlations   []CorrelationKey
	Now            time.Time

	PayloadHash                   string
	Amount, Currency, EventStatus string
}

// BlockedBy returns the business key suspect among flags (WouldFlag's for p) that makes
// a delivery p describes a duplicate of its delivery, as intake's claim would: when p's
// source blocks (BusinessBlocks) and one was found.
func (p Probe) BlockedBy(flags []Suspect) (Suspect, bool) {
	if !p.BusinessBlocks {
		return Suspect{}, false
	}
	for _, f := range flags {
		if f.Kind == SuspectBusinessKey {
			return f, true
		}
	}
	return Suspect{}, false
}

// FirstAccepted is, for the items of one request in the order intake claims them, the
// first item accepted under its own key with each business key: intake judges a later
// item of the same request and business key against that one, in the same transaction
// (a suspected duplicate of it, or its duplicate where business_key_blocks). The key lab
// and `hookdedup key` foresee a request's items with it.
type FirstAccepted map[string]int

// Earlier returns the earlier item of the request accepted with businessKey, for item i,
// accepted under its own key; with none, item i becomes the first of businessKey.
func (f FirstAccepted) Earlier(i int, businessKey string) (int, bool) {
	j, ok := f[businessKey]
	if !ok {
		f[businessKey] = i
	}
	return j, ok
}

// DeliveryFlags are the forensic flags of one delivery.
type DeliveryFlags struct {
	MoneyMismatch bool
	// Suspects are the suspects on the delivery, and those on other deliveries that
	// name it as the one they double, oldest first.
	Suspects []Suspect
}
