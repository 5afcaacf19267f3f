package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_FromADevice: a backup to restore that is a device (/dev/zero, a disk
// named by mistake) or a directory is refused at once, naming what it is: /dev/zero
// would be copied beside the database without end, until the disk is full. A pipe
// stays a backup read as it comes (<(gunzip -c …)). /dev/null stands for the devices
// here: one that is not refused ends at once.
func TestRestore_FromADevice(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "hookdedup.db")
	for from, kind := range map[string]string{"/dev/null": "a device", dir: "a directory"} {
		_, err := sqlite.Restore(context.Background(), from, target)
		if err == nil || !strings.Contains(err.Error(), from+" is "+kind) {
			t.Errorf("restore from %s: %v; want a refusal saying it is %s", from, err, kind)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the database path after refused restores: %v; want nothing there", err)
	}
}
