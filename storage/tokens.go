package storage

import (
	"time"
)

// MaxTokenName bounds the name of an API token, in characters, as the console's form
// counts them (its maxlength).
const MaxTokenName = 64

// TokenNameProblem says, in a sentence for whoever typed it, what is wrong with the name
// of a new API token, or "" when nothing is: it is counted as a reason is
// (ReasonProblem), and holds no control character at all, not even a line break or a
// tab: token list prints it in a row of a table on a terminal. Whether a name must be
// given is the caller's to say.
func TokenNameProblem(name string) string { return textProblem("name", name, MaxTokenName, false) }

// Token is an API bearer token's metadata; the token itself is never stored.
type Token struct {
	ID        int64
	UserID    int64
	UserName  string
	Role      string
	Name      string
	CreatedAt time.Time
	RevokedAt time.Time // zero while valid
}
