package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_OneTimePasswordMigrate: on a database from before the mark, the first admin that
// serve added is marked while still on the printed password, and not once it was set.
func TestDB_OneTimePasswordMigrate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		reset bool // the password was set after serve added the user
	}{{"Printed", false}, {"SetSince", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.db")
			db, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []storage.User{{Name: "admin", Role: storage.RoleAdmin}, {Name: "bo", Role: storage.RoleAdmin}} {
				u.PasswordHash = "h"
				actor := "cli:root"
				if u.Name == "admin" {
					actor = "serve (first start)"
				}
				if _, err := db.CreateUser(ctx, u, actor); err != nil {
					t.Fatal(err)
				}
			}
			if tc.reset {
				if err := db.SetUserPassword(ctx, "admin", "h2", "cli:root"); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// Back to the schema of before the mark.
			execFile(t, path,
				`ALTER TABLE users DROP COLUMN must_change_password`,
				`DELETE FROM migrations WHERE name LIKE '%0009_%'`,
			)

			db = storagetest.OpenPath(t, path, sqlite.Options{})
			for name, want := range map[string]bool{"admin": !tc.reset, "bo": false} {
				if u, err := db.UserByName(ctx, name); err != nil || u.MustChangePassword != want {
					t.Errorf("%s after the upgrade: must change %v, %v; want %v", name, u.MustChangePassword, err, want)
				}
			}
		})
	}
}
