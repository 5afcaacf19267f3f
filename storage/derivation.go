package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

const (
	// MethodEventID is Derivation.Method when the provider's event id is the key.
	MethodEventID = "event_id"
	// MethodDerived is Derivation.Method when the key was hashed from the key fields.
	MethodDerived = "derived"
)

// Field is one key field's value as it entered a derivation.
type Field struct {
	Pointer string
	// Present is false when the pointer names nothing or names null: both enter the
	// hash as null.
	Present bool
	// Value is the canonical JSON of the value, "null" when absent.
	Value string
}

// Derivation is a delivery's key and how it was obtained. The receiver makes one from
// each delivery it takes in, and a stored delivery's is rebuilt from what intake
// recorded (Delivery.Derivation), so it reads the same whatever the configuration
// says today.
type Derivation struct {
	// Key is the idempotency key: the event id, or "derived:" + Hash.
	Key string
	// Method is MethodEventID or MethodDerived; "" when no key could be derived.
	Method string
	// EventIDFrom is the pointer or "header:Name" the id came from (Method ==
	// MethodEventID).
	EventIDFrom string
	// Fields are the key fields (Method == MethodDerived, and, when no key could be
	// derived, to show what was looked for): in the source's order when just derived,
	// in the canonical JSON's order when rebuilt from a stored delivery.
	Fields []Field
	// Canonical is the RFC 8785 canonical JSON of {pointer: value, ...} (Method ==
	// MethodDerived).
	Canonical string
	// Hash is the hex SHA-256 of Canonical (Method == MethodDerived).
	Hash string
	// PayloadHash is the hex SHA-256 of the canonical JSON of the whole body, so bodies
	// that differ only in member order, whitespace or number spelling are not flagged
	// as a mismatch between deliveries of one key. An integer that float64 cannot hold
	// keeps its digits there: bodies that differ in one are not the same payload.
	PayloadHash string
}

// Derivation returns how d's key was derived, read back from what intake stored.
func (d Delivery) Derivation() Derivation {
	kd := Derivation{Key: d.Key, Method: d.KeyMethod, EventIDFrom: d.KeyFrom, Canonical: d.KeyCanonical,
		PayloadHash: d.PayloadHash}
	if d.KeyCanonical == "" {
		return kd
	}
	sum := sha256.Sum256([]byte(d.KeyCanonical))
	kd.Hash = hex.EncodeToString(sum[:])
	// The canonical form is an object of pointer → value, in RFC 8785's key order.
	dec := json.NewDecoder(bytes.NewReader([]byte(d.KeyCanonical)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return kd
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return kd
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return kd
		}
		kd.Fields = append(kd.Fields, Field{Pointer: name, Value: string(v), Present: string(v) != "null"})
	}
	return kd
}
