package enginetest

import (
	"context"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

func TestUsersAndAudit(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	for _, n := range []string{"zoe", "ana"} {
		if _, err := db.CreateUser(ctx, storage.User{Name: n, Role: storage.RoleViewer, PasswordHash: "x"}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	us, err := db.Users(ctx)
	if err != nil || len(us) != 2 || us[0].Name != "ana" || us[0].PasswordHash != "" {
		t.Fatalf("users = %+v, %v", us, err)
	}
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota"}); err != nil {
		t.Fatal(err)
	}
	// Newest first: the reveal, then each user added, by whom.
	log, err := db.AuditLog(ctx, 0, 10)
	if err != nil || len(log) != 3 || log[0].Action != "reveal secret" ||
		log[1].Action != "add user" || log[1].Reason != "ana as viewer" || log[1].Actor != "test" || log[2].Reason != "zoe as viewer" {
		t.Fatalf("audit = %+v, %v", log, err)
	}
}
