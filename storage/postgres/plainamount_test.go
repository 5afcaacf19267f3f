package postgres

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestPlainAmountSQL: the statements' test of a plain amount (sqlPlainAmount) says of
// every text what storage.PlainAmount says, at the bounds, past them, with digits of
// other scripts and with the server's legacy string settings, where a backslash in a
// literal is an escape.
func TestPlainAmountSQL(t *testing.T) {
	whole, frac := storage.MaxAmountWhole, storage.MaxAmountFrac
	texts := []string{"", "0", "-0", "412.50", "-3", "007", "0.1", "1.", ".5", "-", "--5", "+5", "-.5", "-5.",
		"1.2.3", "1..2", "1x5", "1e1", "2E-2", " 5", "5 ", "5\n", "\n5", "1,5", "١٢٣", "１２３", "1٫5", "0x10",
		"NaN", "Inf", "-Infinity", "1\\.5", "\\", "5-", "1.-5", "-1.5-",
		strings.Repeat("9", whole), strings.Repeat("9", whole+1),
		"-" + strings.Repeat("9", whole), "-" + strings.Repeat("9", whole+1),
		"1." + strings.Repeat("1", frac), "1." + strings.Repeat("1", frac+1),
		"-" + strings.Repeat("9", whole) + "." + strings.Repeat("1", frac),
		strings.Repeat("9", whole) + "." + strings.Repeat("1", frac+1),
		strings.Repeat("9", whole-1) + "." + strings.Repeat("1", frac+2),
		"1." + strings.Repeat("1", frac) + "." + "1",
		strings.Repeat("9", 1<<20), "-" + strings.Repeat("9", whole) + "." + strings.Repeat("0", frac) + "0",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789.-e+ x"
	for range 2000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		texts = append(texts, string(b))
	}
	url := postgrestest.NewDatabase(t)
	ctx := t.Context()
	for _, legacy := range []bool{false, true} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if legacy {
			if _, err := conn.Exec(ctx, "SET standard_conforming_strings = off"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := conn.Query(ctx, `SELECT a, `+sqlPlainAmount("a")+` FROM unnest($1::text[]) AS v(a)`, texts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var a string
		var plain bool
		_, err = pgx.ForEachRow(rows, []any{&a, &plain}, func() error {
			n++
			if want := storage.PlainAmount(a); plain != want {
				t.Errorf("standard_conforming_strings off %v: %q is a plain amount: %v in SQL, %v in storage", legacy, a, plain, want)
			}
			return nil
		})
		if err != nil || n != len(texts) {
			t.Fatalf("%d of %d texts tested: %v", n, len(texts), err)
		}
	}
}
