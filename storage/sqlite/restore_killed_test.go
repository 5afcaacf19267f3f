package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRestore_KilledBeforeItsRenameLeavesTheDatabase: a restore killed (SIGKILL, a
// power cut) after it has set the database aside and before the restored file is in
// its place must leave a database at the path, the one it was replacing: with nothing
// there, the next serve (systemd starts it again) makes an empty database, answers
// every redelivery as new and hands it downstream again, and issues delivery ids from
// 1 once more.
func TestRestore_KilledBeforeItsRenameLeavesTheDatabase(t *testing.T) {
	ctx := context.Background()
	live, backup := writtenAfterBackup(t, numberedKeys(5)...)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRestoreStopped$")
	cmd.Env = append(os.Environ(), "HOOKDEDUP_RESTORE_FROM="+backup, "HOOKDEDUP_RESTORE_INTO="+live)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "swapping\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	after, err := sqlite.Open(live, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatalf("the database after a restore killed before its rename: %v", err)
	}
	if _, err := after.Claim(ctx, "ota", "after"); err != nil {
		t.Errorf("the database at the path after the killed restore lacks its last key: %v", err)
	}
	if c, err := storagetest.CountDeliveries(ctx, after, ""); err != nil || c.Accepted != 6 {
		t.Errorf("the database at the path after the killed restore holds %+v (%v), want its 6 deliveries", c, err)
	}
	if err := after.Close(); err != nil {
		t.Fatal(err)
	}
	// Run again, it does what it was to do.
	info, err := sqlite.Restore(ctx, backup, live)
	if err != nil {
		t.Fatalf("the restore run again: %v", err)
	}
	if info.Deliveries != 5 {
		t.Errorf("the restore run again: %+v, want the backup's 5 deliveries", info)
	}
}

// TestHelperRestoreStopped is not a test: TestRestore_KilledBeforeItsRenameLeavesTheDatabase
// runs it in a child process, which restores and stops just before the restored file
// is renamed into place, where it is killed.
func TestHelperRestoreStopped(t *testing.T) {
	from, into := os.Getenv("HOOKDEDUP_RESTORE_FROM"), os.Getenv("HOOKDEDUP_RESTORE_INTO")
	if from == "" || into == "" {
		t.Skip("helper process only")
	}
	sqlite.SetBeforeRestoreSwap(t, func() {
		fmt.Println("swapping")
		select {}
	})
	_, err := sqlite.Restore(context.Background(), from, into)
	t.Fatalf("the restore ended (%v) before its rename", err)
}
