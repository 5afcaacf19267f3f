package web

import (
	"context"
	"net/http"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// auditStore is what the audit log page, and the actions audited outside storage's own
// transactions (a revealed secret), ask of storage.
type auditStore interface {
	// AuditLog returns entries newest first, those with an id below before (0: from the newest).
	AuditLog(ctx context.Context, before int64, limit int) ([]storage.AuditEntry, error)
	AppendAudit(ctx context.Context, e storage.AuditEntry) error
	// AuditChain checks the hash chain past the rows its earlier calls checked, a
	// bounded number of rows at a time, and says how far it holds.
	AuditChain(ctx context.Context) (storage.AuditCheck, error)
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	before, err := pageBefore(r.URL.Query())
	if err != nil {
		return err
	}
	const limit = 50
	// One more than listed tells whether there is an older page: a full page alone
	// would link, at the end, to an empty one.
	entries, err := s.audit.AuditLog(r.Context(), before, limit+1)
	if err != nil {
		return err
	}
	more := len(entries) > limit
	entries = entries[:min(len(entries), limit)]
	chain, err := s.audit.AuditChain(r.Context())
	if err != nil {
		return err
	}
	v := views.Audit{Page: s.page(r, "Audit log", "audit"), Chain: auditChain(chain)}
	for _, e := range entries {
		row := views.AuditRow{
			Time: s.shortTime(e.At), TimeTitle: s.fullTime(e.At), Actor: e.Actor, Action: e.Action,
			Source: e.Source, Key: e.Key, KeyShort: shortKey(e.Key), Reason: e.Reason, Previous: e.PreviousState,
		}
		if e.Key != "" {
			row.EventsURL = keyEventsURL(e.Source, e.Key)
		}
		v.Rows = append(v.Rows, row)
	}
	pages := newPager("/audit", nil)
	if more {
		v.NextURL = pages.before(entries[len(entries)-1].ID)
	}
	if before != 0 {
		v.FirstURL = pages.newest()
	}
	return s.render(w, r, http.StatusOK, views.AuditView(v))
}

// auditChain is the view of a check of the hash chain.
func auditChain(c storage.AuditCheck) views.AuditChain {
	v := views.AuditChain{Rows: c.Rows, UpTo: c.LastID, LastHash: c.LastHash}
	switch {
	case c.Break != nil:
		v.State, v.BrokenAt, v.Kind, v.Detail = "broken", c.Break.ID, c.Break.Kind, c.Break.Detail
	case c.More:
		v.State = "partial"
	case c.Rows == 0:
		v.State = "empty"
	default:
		v.State = "intact"
	}
	return v
}
