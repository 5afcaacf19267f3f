package enginetest

import (
	"context"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestReviewSuspect_TextNotUTF8: a review's reason that is not valid UTF-8 (a console
// form posts bytes as they come) is kept on the suspect as the audit log keeps it, each
// byte that is not UTF-8 and each NUL as U+FFFD, on both engines alike: PostgreSQL's text
// cannot hold them, and the suspect's reason would otherwise differ from its audit row's.
func TestReviewSuspect_TextNotUTF8(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	a := recordEvent(t, db, "ota", "evt_a", "h", "P1", "B1", "cancelled", "100.00")
	b := recordEvent(t, db, "ota", "evt_b", "h", "P1", "B1", "cancelled", "100.00")
	s := e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Other: a.ID,
		Source: "ota", Amount: "100.00", Currency: "EUR"})
	got, err := db.ReviewSuspect(ctx, s.ID, "ol\xffga", storage.SuspectConfirmed, "paid tw\xe9ice\x00")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.Suspect(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	const reason, actor = "paid tw\uFFFDice\uFFFD", "ol\uFFFDga"
	for _, x := range []storage.Suspect{got, stored} {
		if x.Reason != reason || x.ReviewedBy != actor {
			t.Errorf("reviewed by %q for %q, want %q for %q", x.ReviewedBy, x.Reason, actor, reason)
		}
	}
	es, err := db.AuditLog(ctx, 0, 1)
	if err != nil || len(es) != 1 || es[0].Actor != actor {
		t.Fatalf("audit = %+v, %v", es, err)
	}
}
