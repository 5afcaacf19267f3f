package postgres

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestFastArrays_AsPgxWrites: each array the writer's statements pass is written byte
// for byte as pgx's own codec writes it, NULLs and empty arrays included, without an
// allocation an element.
func TestFastArrays_AsPgxWrites(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = strings.Repeat("k", i%70)
	}
	for _, c := range []struct {
		name string
		oid  uint32
		v    any
	}{
		{"text", pgtype.TextArrayOID, []string{"", "a", "é😀\x00\xff", strings.Repeat("x", 70000)}},
		{"text, many", pgtype.TextArrayOID, many},
		{"text, empty", pgtype.TextArrayOID, []string{}},
		{"text, nil", pgtype.TextArrayOID, []string(nil)},
		{"int8", pgtype.Int8ArrayOID, []int64{0, 1, -1, math.MinInt64, math.MaxInt64, 1 << 40}},
		{"int8, empty", pgtype.Int8ArrayOID, []int64{}},
		{"int4", pgtype.Int4ArrayOID, []int32{0, -1, math.MinInt32, math.MaxInt32}},
		{"bytea", pgtype.ByteaArrayOID, [][]byte{{0, 1, 255}, nil, {}, bytes.Repeat([]byte{7}, 5000)}},
		{"bytea, all NULL", pgtype.ByteaArrayOID, [][]byte{nil, nil}},
		{"bool", pgtype.BoolArrayOID, []bool{true, false, true}},
		// Not the element's own Go type: pgx's codec, as before.
		{"int8 to int4", pgtype.Int4ArrayOID, []int64{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain, fast := pgtype.NewMap(), pgtype.NewMap()
			useFastArrays(fast)
			want, werr := plain.Encode(c.oid, pgtype.BinaryFormatCode, c.v, nil)
			got, err := fast.Encode(c.oid, pgtype.BinaryFormatCode, c.v, nil)
			if (err == nil) != (werr == nil) || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("wrote %x, %v; pgx writes %x, %v", got, err, want, werr)
			}
		})
	}
	t.Run("allocations", func(t *testing.T) {
		fast := pgtype.NewMap()
		useFastArrays(fast)
		var v any = many
		buf := make([]byte, 0, 1<<17)
		if n := testing.AllocsPerRun(20, func() { fast.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, buf[:0]) }); n > 2 {
			t.Errorf("%.0f allocations to write %d elements", n, len(many))
		}
	})
}

// BenchmarkArrays writes the arrays of a transaction of 40 deliveries as the insert of
// their rows takes them (19 of text, 5 of int8, 2 of int4, one of bool, one of bytea),
// with pgx's codec and with fastArray.
func BenchmarkArrays(b *testing.B) {
	const rows = 40
	text, ints, int4s, bools, bodies := make([]string, rows), make([]int64, rows), make([]int32, rows), make([]bool, rows), make([][]byte, rows)
	for i := range rows {
		text[i] = strings.Repeat("v", 8+i%56)
		ints[i], int4s[i] = int64(i)<<33, int32(i)
		bodies[i] = bytes.Repeat([]byte{'b'}, 600)
	}
	for _, fast := range []bool{false, true} {
		name := "Pgx"
		if fast {
			name = "Fast"
		}
		b.Run(name, func(b *testing.B) {
			m := pgtype.NewMap()
			if fast {
				useFastArrays(m)
			}
			buf := make([]byte, 0, 1<<16)
			b.ReportAllocs()
			enc := func(oid uint32, v any) {
				var err error
				if buf, err = m.Encode(oid, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				for range 19 {
					enc(pgtype.TextArrayOID, text)
				}
				for range 5 {
					enc(pgtype.Int8ArrayOID, ints)
				}
				for range 2 {
					enc(pgtype.Int4ArrayOID, int4s)
				}
				enc(pgtype.BoolArrayOID, bools)
				enc(pgtype.ByteaArrayOID, bodies)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
		})
	}
}
