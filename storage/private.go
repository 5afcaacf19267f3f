package storage

import (
	"errors"
)

// ErrNoDatabase means Open was told the database must exist (Options.MustExist), and
// there is no file at its path.
var ErrNoDatabase = errors.New("no database")
