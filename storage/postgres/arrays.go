package postgres

import (
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgtype"
)

// Every statement of a writer's transaction takes its rows as arrays, a column an
// array (claim.go): a transaction of 40 deliveries sends over a thousand elements.
// pgx encodes a slice through its generic array plan, which boxes each element in an
// interface (an allocation) and looks its plan up again, and that was a third of the
// allocations of a delivery with refund forensics on. The arrays of the Go types the
// statements pass are written here instead, straight from the slice, in the binary
// format that plan writes: one dimension, lower bound 1, a nil []byte a NULL. Any
// other value goes to pgx's codec as before.

// fastArray is the codec of one array type: pgx's own, whose encoding of slices of
// the element's Go type is replaced.
type fastArray struct {
	pgtype.Codec
	elem uint32 // the element type's OID
}

// useFastArrays registers fastArray over pgx's codecs of the array types that the
// statements use, in m, a connection's type map.
func useFastArrays(m *pgtype.Map) {
	for elem, array := range arrayOf {
		t, ok := m.TypeForOID(array)
		if !ok {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: fastArray{Codec: t.Codec, elem: elem}})
	}
}

// arrayOf is the OID of the array type of each element type fastArray writes.
var arrayOf = map[uint32]uint32{
	pgtype.TextOID:  pgtype.TextArrayOID,
	pgtype.Int8OID:  pgtype.Int8ArrayOID,
	pgtype.Int4OID:  pgtype.Int4ArrayOID,
	pgtype.ByteaOID: pgtype.ByteaArrayOID,
	pgtype.BoolOID:  pgtype.BoolArrayOID,
}

// PlanEncode returns the plan that writes value when it is a slice of the element's
// own Go type, in the binary format; pgx's plan otherwise.
func (c fastArray) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case []string:
			if c.elem == pgtype.TextOID {
				return encodeArray[string]{elem: c.elem, put: putText}
			}
		case []int64:
			if c.elem == pgtype.Int8OID {
				return encodeArray[int64]{elem: c.elem, put: putInt8}
			}
		case []int32:
			if c.elem == pgtype.Int4OID {
				return encodeArray[int32]{elem: c.elem, put: putInt4}
			}
		case [][]byte:
			if c.elem == pgtype.ByteaOID {
				return encodeArray[[]byte]{elem: c.elem, put: putBytea}
			}
		case []bool:
			if c.elem == pgtype.BoolOID {
				return encodeArray[bool]{elem: c.elem, put: putBool}
			}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// encodeArray writes a []T as a one-dimensional array of elem; put appends one
// element's bytes and reports false for a NULL.
type encodeArray[T any] struct {
	elem uint32
	put  func(buf []byte, v T) ([]byte, bool)
}

func (p encodeArray[T]) Encode(value any, buf []byte) ([]byte, error) {
	a := value.([]T)
	if a == nil {
		return nil, nil // NULL, as pgx sends a nil slice
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	hasNull := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = binary.BigEndian.AppendUint32(buf, p.elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a)))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	for _, v := range a {
		at := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		var ok bool
		if buf, ok = p.put(buf, v); !ok {
			binary.BigEndian.PutUint32(buf[at:], 0xffffffff) // -1: NULL
			binary.BigEndian.PutUint32(buf[hasNull:], 1)
			continue
		}
		binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	}
	return buf, nil
}

func putText(buf []byte, v string) ([]byte, bool) { return append(buf, v...), true }

func putInt8(buf []byte, v int64) ([]byte, bool) {
	return binary.BigEndian.AppendUint64(buf, uint64(v)), true
}

func putInt4(buf []byte, v int32) ([]byte, bool) {
	return binary.BigEndian.AppendUint32(buf, uint32(v)), true
}

func putBytea(buf []byte, v []byte) ([]byte, bool) {
	if v == nil {
		return buf, false
	}
	return append(buf, v...), true
}

func putBool(buf []byte, v bool) ([]byte, bool) {
	if v {
		return append(buf, 1), true
	}
	return append(buf, 0), true
}
