package enginetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAuditHash_Encoding pins the documented encoding: a hash computed outside Go (with
// Python's hashlib, as the README shows) for a row with a CR LF, quotes and a non-ASCII
// letter, then one chained after it.
func TestAuditHash_Encoding(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	at := time.UnixMilli(1767225600000)
	e.SetClock(db, func() time.Time { return at })
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "release", Source: "ota", Key: "evt_1",
		Reason: "double refund\r\n, \"quoted\" é", PreviousState: "failed"}); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Second)
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "serve (first start)", Action: "add user", Reason: "admin as admin"}); err != nil {
		t.Fatal(err)
	}
	log, err := db.AuditLog(ctx, 0, 10)
	if err != nil || len(log) != 2 {
		t.Fatalf("audit log = %+v, %v", log, err)
	}
	if want := "606c1ff05d21c2078ca81220889eec8aa96db3ff822ae09ed11c952c4dc7f390"; log[1].Hash != want {
		t.Errorf("row 1 hash = %s, want %s", log[1].Hash, want)
	}
	if want := "c6942b0061d13ee5f9302c0b56ce800feb425f4078cabae50e797c39fa748f00"; log[0].Hash != want {
		t.Errorf("row 2 hash = %s, want %s", log[0].Hash, want)
	}
}

// TestVerifyAudit_Intact: every writer of audit rows (users, sessions, tokens, releases,
// a revealed secret) chains its row; the check counts them and ends at the newest.
func TestVerifyAudit_Intact(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c, err := db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break != nil || c.Rows != 0 || c.LastID != 0 || c.LastHash != storage.AuditGenesis {
		t.Fatalf("empty log: %+v, %v", c, err)
	}
	createUser(t, db, "ana", storage.RoleViewer, "pw")
	if _, err := db.SetUserRole(ctx, "ana", storage.RoleOperator, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EndUserSessions(ctx, "ana", "root"); err != nil {
		t.Fatal(err)
	}
	_, tok, err := db.CreateToken(ctx, "ana", "ci", "root")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(ctx, tok.ID, "", "root"); err != nil {
		t.Fatal(err)
	}
	d := record(t, db, &storage.Delivery{Source: "ota", Key: "k1", PayloadHash: "h", Body: []byte(`{}`)},
		storage.ClaimOptions{TTL: time.Hour})
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: d.Key, Actor: "ana", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Source: "ota"}); err != nil {
		t.Fatal(err)
	}
	log, err := db.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	c, err = db.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break != nil || c.Rows != int64(len(log)) || c.LastID != log[0].ID || c.LastHash != log[0].Hash {
		t.Fatalf("verify = %+v, %v; log has %d rows, newest %d %s", c, err, len(log), log[0].ID, log[0].Hash)
	}
	// Recomputed apart from storage, from the genesis.
	prev := storage.AuditGenesis
	for i := len(log) - 1; i >= 0; i-- {
		e := log[i]
		if h := refHash(prev, e.ID, e.At.UnixMilli(), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState); h != e.Hash {
			t.Fatalf("row %d (%s): hash %s, recomputed %s", e.ID, e.Action, e.Hash, h)
		}
		prev = e.Hash
	}
}

// TestAuditChain_ConcurrentWriters appends from many goroutines through two handles on
// one database (serve and a command, or two replicas): the chain never forks, every row chains.
func TestAuditChain_ConcurrentWriters(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Go(func() {
			for i := range each {
				if err := db.AppendAudit(ctx, storage.AuditEntry{Actor: fmt.Sprint("w", w), Action: "test", Reason: fmt.Sprint(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c, err := a.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break != nil || c.Rows != writers*each {
		t.Fatalf("verify = %+v, %v; want %d rows chained", c, err, writers*each)
	}
}

// refHash is the chain's encoding as the documentation gives it, written apart from
// storage's own so that the two can disagree: SHA-256 over length-prefixed fields, the
// previous hash first.
func refHash(prev string, id, at int64, actor, action, source, key, reason, previous string) string {
	var b []byte
	for _, v := range []string{prev, "hookdedup audit v1", fmt.Sprint(id), fmt.Sprint(at), actor, action, source, key, reason, previous} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(v)))
		b = append(b, v...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
