package sqlite_test

import (
	"context"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRestore_CommandOpenDuringTheSwapKeepsTheReplaced: while a restore has the database
// it replaces under a second name (the kept-aside copy, a hard link until the restored
// file takes the path), another command opens the database (hookdedup keys). That open
// must not take the second name for one a killed restore left and remove it: the
// database the restore replaces would then have no name left once the rename is done.
func TestRestore_CommandOpenDuringTheSwapKeepsTheReplaced(t *testing.T) {
	ctx := context.Background()
	live, backup := writtenAfterBackup(t, numberedKeys(5)...)
	opened := false
	sqlite.SetBeforeRestoreSwap(t, func() {
		if other, err := sqlite.Open(live, sqlite.Options{MustExist: true, NoReadAhead: true}); err == nil {
			opened = true
			other.Close()
		}
	})
	info, err := sqlite.Restore(ctx, backup, live)
	if err != nil {
		t.Fatal(err)
	}
	if opened {
		t.Error("a command opened the database while a restore had it under two names")
	}
	kept := storagetest.OpenPath(t, info.Previous, sqlite.Options{MustExist: true})
	defer kept.Close()
	if c, err := storagetest.CountDeliveries(ctx, kept, ""); err != nil || c.Accepted != 6 {
		t.Errorf("the database the restore replaced, kept aside at %s: %+v (%v), want its 6 deliveries", info.Previous, c, err)
	}
}
