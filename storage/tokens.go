package storage

import (
	"time"
)

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
