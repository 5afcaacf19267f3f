package sqlite_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestCheckPassword pins the one password rule at its bounds: 12 characters at least
// (characters, not bytes: four Japanese ones are twelve bytes),
// and no more than the 72 bytes bcrypt reads (a longer one would be cut without a word),
// and only UTF-8 text without control characters, as the sign-in page sends.
func TestCheckPassword(t *testing.T) {
	tests := []struct {
		name, password string
		want           string // "" when accepted
	}{
		{"Empty", "", "at least 12 characters"},
		{"Eleven", strings.Repeat("a", 11), "at least 12 characters"},
		{"Twelve", strings.Repeat("a", 12), ""},
		{"ElevenAccented", strings.Repeat("é", 11), "at least 12 characters"},
		{"FourOfTwelveBytes", "日本語パ", "at least 12 characters"},
		{"TwelveJapanese", strings.Repeat("パ", 12), ""},
		{"SeventyTwoBytes", strings.Repeat("é", 36), ""},
		{"SeventyThreeBytes", strings.Repeat("é", 36) + "a", "at most 72 bytes"},
		{"Latin1", "Passw\xf6rter-des-Jahres", "not UTF-8"},
		{"NUL", "correct horse\x00battery", "control character (U+0000)"},
		{"ByteOrderMark", "\uFEFFcorrect horse battery", "byte order mark"},
		{"Tab", "correct horse\tbattery", "control character (U+0009)"},
		{"Spaces", "correct horse battery ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := storage.CheckPassword(tc.password)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}
