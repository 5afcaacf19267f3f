package web

import (
	"net/http"
	"strconv"

	"github.com/hookdedup/hookdedup/views"
)

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return badRequest("That page address is not valid.")
		}
		before = n
	}
	const limit = 50
	entries, err := s.store.AuditLog(r.Context(), before, limit)
	if err != nil {
		return err
	}
	v := views.Audit{Page: s.page(r, "Audit log", "audit")}
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
	if len(entries) == limit {
		v.NextURL = "/audit?before=" + strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return s.render(w, r, http.StatusOK, views.AuditView(v))
}
