//go:build !(linux && (amd64 || arm64))

package sqlite

import "syscall"

// syncFileRange is not offered here: the checkpointer fsyncs instead (writeBack).
func syncFileRange(int) error { return syscall.ENOSYS }
