package storage

import (
	"time"
)

// Session is a signed-in console session.
type Session struct {
	User      User      // who it acts as, as the users table says now; PasswordHash left empty
	CreatedAt time.Time // sign-in
	SeenAt    time.Time // the last request recorded by TouchSession
}
