package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// KeyField is one key field as it entered a derived key.
type KeyField struct {
	Pointer string
	Value   string // canonical JSON; "null" when the field was absent (or null)
}

// KeyDerivation is how a stored delivery's key was obtained, rebuilt from what intake
// recorded, so that it reads the same whatever the configuration says today.
type KeyDerivation struct {
	Method    string // "event_id" or "derived"; "" for a rejection
	From      string // the pointer or "header:Name" an event id came from
	Fields    []KeyField
	Canonical string // the RFC 8785 JSON a derived key hashes
	Hash      string // hex SHA-256 of Canonical
}

// KeyDerivation returns how d's key was derived.
func (d Delivery) KeyDerivation() KeyDerivation {
	kd := KeyDerivation{Method: d.KeyMethod, From: d.KeyFrom, Canonical: d.KeyCanonical}
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
		kd.Fields = append(kd.Fields, KeyField{Pointer: name, Value: string(v)})
	}
	return kd
}
