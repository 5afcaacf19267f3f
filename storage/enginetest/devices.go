package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestKnownDevice: a device cookie's id counts as a browser the user signed in from only
// once RememberDevice kept it for that user; for another user, after it was forgotten,
// or once the user is removed, it is unknown.
func TestKnownDevice(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	createUser(t, db, "ada", storage.RoleAdmin, "correct horse battery")
	createUser(t, db, "bo", storage.RoleViewer, "correct horse battery")
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const life = 90 * 24 * time.Hour
	known := func(name, id string, since time.Time) bool {
		t.Helper()
		ok, err := db.KnownDevice(ctx, name, id, since)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if known("ada", "dev-1", at.Add(-life)) {
		t.Error("an id never kept is known")
	}
	if err := db.RememberDevice(ctx, "ada", "dev-1", at, at.Add(-life)); err != nil {
		t.Fatal(err)
	}
	if !known("ada", "dev-1", at.Add(-life)) {
		t.Error("an id kept for ada is unknown")
	}
	if known("bo", "dev-1", at.Add(-life)) {
		t.Error("ada's device is known as bo's")
	}
	// A name as typed at sign-in, which no user can have, is no error.
	if known("ada\x00", "dev-1", at.Add(-life)) || known("ada\xff", "dev-1", at.Add(-life)) {
		t.Error("ada's device is known under a name no user can have")
	}
	if known("ada", "dev-1", at.Add(time.Millisecond)) {
		t.Error("a device not signed in from since is known")
	}
	// Kept for bo too, it stays ada's: an id is one browser's for one user.
	if err := db.RememberDevice(ctx, "bo", "dev-1", at, at.Add(-life)); err != nil {
		t.Fatal(err)
	}
	if known("bo", "dev-1", at.Add(-life)) {
		t.Error("ada's device was taken over for bo")
	}
	// A sign-in later keeps it longer, and forgets the devices not signed in from since.
	later := at.Add(life)
	if err := db.RememberDevice(ctx, "bo", "dev-2", later, later.Add(-life).Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if known("ada", "dev-1", at.Add(-life)) {
		t.Error("a device past its life was not forgotten")
	}
	if err := db.RememberDevice(ctx, "nobody", "dev-3", later, later.Add(-life)); err != nil {
		t.Fatal(err)
	}
	if known("nobody", "dev-3", later.Add(-life)) {
		t.Error("a device kept for no user is known")
	}
	if !known("bo", "dev-2", later.Add(-life)) {
		t.Fatal("bo's device is unknown")
	}
	if err := db.DeleteUser(ctx, "bo", "ada"); err != nil {
		t.Fatal(err)
	}
	createUser(t, db, "bo", storage.RoleViewer, "correct horse battery")
	if known("bo", "dev-2", later.Add(-life)) {
		t.Error("a removed user's device is known as the new bo's")
	}
}
