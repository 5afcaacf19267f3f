package storage

import (
	"time"
)

// RejectionCount is how many rejections of one source (or unknown name) and HTTP status,
// received in one minute, were counted without being stored as deliveries.
type RejectionCount struct {
	Source     string
	Status     int
	Minute     time.Time // the minute's start; a time within it is rounded down
	Rejections int64
}
