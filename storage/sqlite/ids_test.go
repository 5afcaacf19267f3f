package sqlite

import "testing"

// TestAuditTokenID: the id is read after the token's quoted name, so that a name that
// holds an id of its own, quotes included, is not taken for the token's.
func TestAuditTokenID(t *testing.T) {
	for reason, want := range map[string]int64{
		`"ci" (id 5) for rita`:              5,
		`"ci" (id 12) of rita`:              12,
		`"x\" (id 99) y" (id 7) of bo`:      7,
		`"(id 98)" (id 3) for bo`:           3,
		`"ci" (id 0) for rita`:              0,
		`"ci" (id -4) for rita`:             0,
		`"ci" (id 5 for rita`:               0,
		`ci (id 5) for rita`:                0,
		`"unterminated (id 5) for rita`:     0,
		`"ci" (id 99999999999999999999) of`: 0,
	} {
		got, ok := auditTokenID(reason)
		if got != want || ok != (want > 0) {
			t.Errorf("auditTokenID(%q) = %d, %v; want %d", reason, got, ok, want)
		}
	}
}
