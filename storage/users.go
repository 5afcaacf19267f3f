package storage

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Roles, each allowed what the one before it is and more.
const (
	RoleViewer   = "viewer"   // browse
	RoleOperator = "operator" // + release, reprocess
	RoleAdmin    = "admin"    // + users, sources
)

// RoleAtLeast reports whether role may do what needs at least role need: viewer <
// operator < admin.
func RoleAtLeast(role, need string) bool {
	rank := map[string]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}
	return rank[role] > 0 && rank[role] >= rank[need]
}

// ValidRole reports whether role is one of the roles.
func ValidRole(role string) bool {
	return role == RoleViewer || role == RoleOperator || role == RoleAdmin
}

// CheckPassword applies the rule for a new console password, the same from the console
// and the command line. Its error is worded for the person choosing the password. The
// least is counted in characters, as it is worded: counted in bytes, four Japanese
// characters or six accented letters would pass for twelve. The most is bcrypt's, in
// bytes. The sign-in page sends UTF-8 text without control characters, so a password
// that is not such text (one piped to user password from a file in Latin-1, or with a
// NUL or a byte order mark in it) could be set but never typed there: its user, the only admin perhaps,
// would be locked out.
func CheckPassword(password string) error {
	switch {
	case !utf8.ValidString(password):
		return errors.New("password is not UTF-8 text (from a file in another encoding?): the sign-in page sends UTF-8, so it could never be typed there")
	case utf8.RuneCountInString(password) < 12:
		return errors.New("password needs at least 12 characters")
	case len(password) > 72:
		return errors.New("password can have at most 72 bytes (bcrypt's limit)")
	}
	if strings.ContainsRune(password, '\uFEFF') {
		// Notepad begins a UTF-8 file with one; no keyboard types it.
		return errors.New("password holds a byte order mark (U+FEFF, from a file saved with one?), which the sign-in page cannot take: save the file without it")
	}
	if i := strings.IndexFunc(password, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(password[i:])
		return fmt.Errorf("password holds a control character (U+%04X), which the sign-in page cannot take: choose one of printable characters", r)
	}
	return nil
}

// CheckUserName applies the rule for a new user's name, the same from the console and
// the command line. Its error is worded for the person choosing the name.
func CheckUserName(name string) error {
	if !validUserName.MatchString(name) {
		return errors.New("a user name is 1 to 64 letters, digits, dots, dashes, underscores or @, starting with a letter or digit")
	}
	return nil
}

// ErrExists means a row with the same unique name already exists.
var ErrExists = errors.New("already exists")

// UserNameTakenError is CreateUser's refusal of a name that an existing user has,
// letter case aside: op1 and OP1 would read as one person in the audit log and in the
// four-eyes approval of a bulk action, whose approver must be another user than its
// requester. It is ErrExists (errors.Is).
type UserNameTakenError struct {
	Name     string // the name asked for
	Existing string // the existing user's, as stored
}

func (e *UserNameTakenError) Error() string {
	if e.Name == e.Existing {
		return fmt.Sprintf("user %q already exists", e.Existing)
	}
	return fmt.Sprintf("user %q already exists, and %q differs from it only in letter case", e.Existing, e.Name)
}

// Unwrap makes the error ErrExists.
func (e *UserNameTakenError) Unwrap() error { return ErrExists }

// User is a console user. PasswordHash is a bcrypt hash.
type User struct {
	ID           int64
	Name         string
	Role         string
	PasswordHash string
	CreatedAt    time.Time
	// MustChangePassword: someone else chose the password (serve's first admin, an
	// admin in the console), so the console asks the user for their own before
	// anything else. Setting it with SetUserPassword clears it.
	MustChangePassword bool
}

// ErrLastAdmin means a change would leave the console without an admin, and so nobody
// who could manage its users.
var ErrLastAdmin = errors.New("the only admin")

// validUserName is the rule for a new user's name: it is shown in the console, the
// audit log and the CLI's output, so it holds no control, bidi or invisible character
// and nothing that could pass for another name.
var validUserName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
