package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// CurrencyExponent returns how many decimal places the minor unit of currency has, by
// ISO 4217: 0 for JPY, 3 for KWD, 4 for CLF, 2 for any other code and for "". The code
// is matched in any case.
func CurrencyExponent(currency string) int {
	if e, ok := currencyExponents[strings.ToUpper(currency)]; ok {
		return e
	}
	return 2
}

// CurrencyCode is a currency as a delivery states it, the way it is stored and summed:
// trimmed and in upper case (Stripe writes "eur", Adyen "EUR"). Text longer than any
// currency code is cut.
func CurrencyCode(s string) string {
	code, _ := CurrencyCodeWhole(s)
	return code
}

// CurrencyCodeWhole is CurrencyCode, and whether s was kept whole: false when it was
// longer than any currency code and cut, when two texts that differ past the cut read
// as one currency. What compares currencies across deliveries by a hash (a correlation
// rule) reads no currency there.
func CurrencyCodeWhole(s string) (code string, whole bool) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) > maxCurrency {
		return strings.ToValidUTF8(s[:maxCurrency], ""), false
	}
	return s, true
}

// MajorUnits writes amount, a number of minor units of currency as text ("41250"), in
// major units ("412.50"). The decimal point moves by the currency's exponent, the
// sender's own where exponents names it (Adyen counts Chilean pesos in hundredths,
// which ISO 4217 has none of) and ISO 4217's otherwise, and nothing is rounded, so no
// cent is lost to a float. A number written with an exponent ("1.825e4") is read as
// the plain decimal it is, within MaxNumberText and MaxNumberExp, as a correlation rule
// reads it: kept as sent, it would read as that many major units. ok is false, and
// amount is returned as it is, when amount is no such number nor a plain decimal (an
// optional "-", digits, optionally "." and digits).
func MajorUnits(amount, currency string, exponents map[string]int) (major string, ok bool) {
	digits := amount
	if !PlainAmount(amount) && numberAmount(amount) {
		if d, ok := NumberText(amount); ok {
			digits = d
		}
	}
	neg, whole, frac, ok := plainDecimal(digits)
	if !ok {
		return amount, false
	}
	exp, own := exponents[strings.ToUpper(currency)]
	if !own {
		exp = CurrencyExponent(currency)
	}
	if len(whole) <= exp {
		whole = strings.Repeat("0", exp-len(whole)+1) + whole
	}
	whole, frac = whole[:len(whole)-exp], whole[len(whole)-exp:]+frac
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, true
}

// currencyExponents are the ISO 4217 currencies whose minor unit is not a hundredth of
// the major one, with the number of decimal places it has. Every other code, and an
// amount with no currency, has two. This is the one table of them: intake reads it to
// turn amounts sent in minor units into major ones, the console to write sums.
var currencyExponents = map[string]int{
	// No minor unit.
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	// Thousandths.
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	// Units of account kept to four places.
	"CLF": 4, "UYW": 4,
}

// CurrencyTable names the table of currency exponents this build reads amounts by
// (currencyExponents and the default of two places): the engines' running totals of
// suspects hold amounts in minor units as one table read them, and keep its name with
// them, so that a build whose table differs recounts them rather than mixing the two.
func CurrencyTable() string {
	h := sha256.New()
	fmt.Fprintf(h, "default=2;")
	for _, c := range slices.Sorted(maps.Keys(currencyExponents)) {
		fmt.Fprintf(h, "%s=%d;", c, currencyExponents[c])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// SetCurrencyExponent gives currency exp decimal places until the returned func is
// called: for tests only, the table as a later release that changed it would read it.
// It is not safe while anything else reads amounts.
func SetCurrencyExponent(currency string, exp int) (restore func()) {
	old, had := currencyExponents[currency]
	currencyExponents[currency] = exp
	return func() {
		if had {
			currencyExponents[currency] = old
		} else {
			delete(currencyExponents, currency)
		}
	}
}

// MoneyTerms is what a money mismatch compares of two deliveries of one key whose
// payloads differ: the amount, the currency and the event status, as stored.
type MoneyTerms struct{ Amount, Currency, Status string }

// Same reports whether m and o carry the same money: the same amount (SameAmount: one
// number spelt two ways is one amount), the same currency and the same event status. A
// duplicate whose payload differs from its first delivery's is a money mismatch when
// they do not; intake, the key lab and the comparison of two deliveries all ask here.
// The PostgreSQL store's statement (sqlMoneyMismatches) spells the same rule in SQL.
func (m MoneyTerms) Same(o MoneyTerms) bool {
	return SameAmount(m.Amount, o.Amount) && m.Currency == o.Currency && m.Status == o.Status
}

// MoneyTerms is what a money mismatch compares of d.
func (d *Delivery) MoneyTerms() MoneyTerms {
	return MoneyTerms{Amount: d.Amount, Currency: d.Currency, Status: d.EventStatus}
}

// MoneyTerms is what a money mismatch would compare of a delivery p describes.
func (p *Probe) MoneyTerms() MoneyTerms {
	return MoneyTerms{Amount: p.Amount, Currency: p.Currency, Status: p.EventStatus}
}

// SameAmount reports whether a and b, two amounts as stored, are the same money: the
// same text, or the same number spelt two ways ("412.50" and "412.5", "-0" and "0",
// "10" and "1e1"), as one provider may send an amount as a JSON string and again as a
// number, or quote a number as its serializer wrote it. A money mismatch compares
// amounts through it. Numbers are read as plain decimals within PlainAmount's bounds,
// or as JSON writes a number with an exponent within NumberText's bounds; any other
// text (a fraction, a comma) is compared as text. The PostgreSQL store's statement
// reads the same two spellings alike.
func SameAmount(a, b string) bool {
	if a == b {
		return true
	}
	if x, ok := boundedDecimal(a); ok {
		if y, ok := boundedDecimal(b); ok {
			return x.Cmp(y) == 0
		}
	}
	if !numberAmount(a) || !numberAmount(b) {
		return false
	}
	x, okx := NumberText(a)
	y, oky := NumberText(b)
	return okx && oky && x == y
}

// numberAmount reports whether s is a PlainAmount, or a plain decimal followed by an
// exponent ("1.825e2", "1E+1") within MaxNumberText and MaxNumberExp: a number as JSON
// writes one.
func numberAmount(s string) bool {
	if PlainAmount(s) {
		return true
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 || len(s) > MaxNumberText {
		return false
	}
	if _, _, _, ok := plainDecimal(s[:i]); !ok {
		return false
	}
	exp := s[i+1:]
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	if exp == "" || !allDigits(exp) {
		return false
	}
	n, err := strconv.Atoi(exp)
	return err == nil && n <= MaxNumberExp
}

// The bounds of a PlainAmount: digits before the point, and after it. No amount has
// so many; a float holds every number within them.
const (
	MaxAmountWhole = 200
	MaxAmountFrac  = 100
)

// boundedDecimal is ParseDecimal within MaxAmountWhole and MaxAmountFrac digits.
func boundedDecimal(s string) (*big.Rat, bool) {
	if !PlainAmount(s) {
		return nil, false
	}
	r, _, ok := ParseDecimal(s)
	return r, ok
}

// PlainAmount reports whether amount is a plain decimal number (an optional "-",
// digits, optionally "." and digits) of at most MaxAmountWhole digits before the point
// and MaxAmountFrac after it: the amounts that are read as numbers wherever amounts are
// summed or compared, the ledger's exact sums and the dashboard's alike. Anything else
// ("1.234,56", "1e1", "n/a") is counted as unsummed, never read by a numeric prefix.
// The engines' SQL holds the same rule for the sums they take in a statement.
func PlainAmount(amount string) bool {
	_, whole, frac, ok := plainDecimal(amount)
	return ok && len(whole) <= MaxAmountWhole && len(frac) <= MaxAmountFrac
}

// plainDecimal splits a plain decimal number into its sign, its digits before the
// point and those after it; ok is false for anything else.
func plainDecimal(s string) (neg bool, whole, frac string, ok bool) {
	digits := s
	if rest, cut := strings.CutPrefix(digits, "-"); cut {
		neg, digits = true, rest
	}
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || (dot && (frac == "" || !allDigits(frac))) {
		return false, "", "", false
	}
	return neg, whole, frac, true
}

// maxCurrency bounds a currency code as stored: ISO codes have three letters, and
// anything much longer is a pointer aimed at the wrong field.
const maxCurrency = 16

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MaxNumberText and MaxNumberExp bound an amount spelt otherwise than as a plain
// decimal (with an exponent, a fraction): its length, and its exponent either way.
// Past them it is no number that anything reads: big.Rat spells out the exponent it is
// given, and no amount is that long, nor that large or small.
const (
	MaxNumberText = 64
	MaxNumberExp  = 40
)

// NumberText is the one spelling of a number, as correlation rules compare amounts and
// SameAmount compares those written with an exponent: a plain decimal without padding
// ("-0120.50" → "-120.5", "7.00" and "7e0" → "7"), or, for a fraction with no finite
// decimal, its exact rational ("1/3"); false when amount is not a number, or is one
// spelt otherwise than as a plain decimal beyond MaxNumberText or MaxNumberExp.
func NumberText(amount string) (string, bool) {
	neg := strings.HasPrefix(amount, "-")
	digits := strings.TrimPrefix(amount, "-")
	whole, frac, _ := strings.Cut(digits, ".")
	simple := whole != "" && strings.Trim(whole, "0123456789") == "" && strings.Trim(frac, "0123456789") == ""
	if !simple {
		// big.Rat spells out the exponent it is given: "1e999999" is a megabyte of
		// digits and seconds of CPU. No amount is that long, nor that large or small.
		if len(amount) > MaxNumberText {
			return "", false
		}
		if i := strings.IndexAny(amount, "eEpP"); i >= 0 {
			if exp, err := strconv.Atoi(amount[i+1:]); err != nil || exp < -MaxNumberExp || exp > MaxNumberExp {
				return "", false
			}
		}
		n, ok := new(big.Rat).SetString(amount)
		if !ok {
			return "", false
		}
		// Spelt as a plain decimal where one is exact, so that "1.825e2" and "182.5"
		// agree; a fraction with no finite decimal keeps its rational spelling. A
		// decimal within the bounds above has at most MaxNumberText+MaxNumberExp
		// places: all of them are spelt, as PostgreSQL's numeric holds them.
		d := n.FloatString(MaxNumberText + MaxNumberExp)
		if back, ok := new(big.Rat).SetString(d); !ok || back.Cmp(n) != 0 {
			return n.RatString(), true
		}
		return NumberText(d)
	}
	whole = strings.TrimLeft(whole, "0")
	frac = strings.TrimRight(frac, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out, true
}
