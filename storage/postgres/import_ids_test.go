package postgres_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestImport_RemovedIDsNotGivenAgain: a SQLite database whose newest user and token
// were removed, copied, gives neither id again: the audit log copied with it names the
// token by that id, and PostgreSQL would otherwise go on from the highest id left.
func TestImport_RemovedIDsNotGivenAgain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	lite := storagetest.OpenPath(t, path, sqlite.Options{})
	storagetest.CreateUser(t, lite, "ana", storage.RoleAdmin, "pw-ana-1234567")
	bo := storagetest.CreateUser(t, lite, "bo", storage.RoleOperator, "pw-bo-1234567")
	if _, _, err := lite.CreateToken(ctx, "ana", "ci", "ana"); err != nil {
		t.Fatal(err)
	}
	_, gone, err := lite.CreateToken(ctx, "bo", "scripts", "bo")
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.DeleteUser(ctx, "bo", "ana"); err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}
	db, _, _, err := importFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := db.CreateToken(ctx, "ana", "report", "ana")
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID <= gone.ID {
		t.Errorf("a token made after the copy took the id %d; the removed one's was %d", tok.ID, gone.ID)
	}
	cy, err := db.CreateUser(ctx, storage.User{Name: "cy", Role: storage.RoleViewer, PasswordHash: "x"}, "ana")
	if err != nil {
		t.Fatal(err)
	}
	if cy.ID <= bo.ID {
		t.Errorf("a user made after the copy took the id %d; the removed one's was %d", cy.ID, bo.ID)
	}
}
