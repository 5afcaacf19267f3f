//go:build linux && (amd64 || arm64)

package sqlite

import "syscall"

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writing the range's dirty pages,
// without waiting for pages already being written.
const syncFileRangeWrite = 2

// syncFileRange starts the disk writing every dirty page of the file fd and returns
// without waiting (sync_file_range(2) over the whole file). On these 64-bit systems the
// call takes its arguments in this order, each in one register.
func syncFileRange(fd int) error {
	if _, _, errno := syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, uintptr(fd), 0, 0, syncFileRangeWrite, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
