package storage_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestTokenNameProblem_NoControlCharacters: a token's name is printed in a row of token
// list's table on a terminal, so it holds no control character at all: a carriage
// return would overwrite the row, a line break or a tab forge rows and columns. A
// reason, text of several lines, keeps its line breaks and tabs.
func TestTokenNameProblem_NoControlCharacters(t *testing.T) {
	for _, name := range []string{"ci\rroot-deploy", "ci\n7  admin  admin", "ci\tadmin", "ci\x1b[2J"} {
		if p := storage.TokenNameProblem(name); !strings.Contains(p, "control character") {
			t.Errorf("TokenNameProblem(%q) = %q; want a control character refused", name, p)
		}
		if reason := strings.ReplaceAll(name, "\x1b[2J", ""); storage.ReasonProblem(reason) != "" {
			t.Errorf("ReasonProblem(%q) = %q; want line breaks and tabs let through", reason, storage.ReasonProblem(reason))
		}
	}
	if p := storage.TokenNameProblem("nightly export, Zürich ホテル"); p != "" {
		t.Errorf("a plain name refused: %s", p)
	}
}
