package sqlite

// #include "walbuf.h"
import "C"

import (
	"fmt"
	"sync"
)

// walbufVFS is the name of the VFS of walbuf.c, which writes the write-ahead log's
// frames of a commit in one system call rather than two a frame.
const walbufVFS = "hookdedup-walbuf"

// registerWalbuf registers walbufVFS, once.
var registerWalbuf = sync.OnceValue(func() error {
	if rc := C.hookdedup_walbuf_register(); rc != 0 {
		return fmt.Errorf("register the %s VFS: SQLite error %d", walbufVFS, int(rc))
	}
	return nil
})

// walbufFrames is how many log frames went through walbufVFS's buffers so far.
func walbufFrames() int64 { return int64(C.hookdedup_walbuf_frames()) }
