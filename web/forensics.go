package web

import (
	"fmt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// labFlags words the suspects the key lab foresees for a payload.
func (s *Server) labFlags(flags []storage.Suspect) []views.LabFlag {
	out := make([]views.LabFlag, 0, len(flags))
	for _, f := range flags {
		lf := views.LabFlag{Kind: string(f.Kind)}
		if f.Other != 0 {
			lf.URL = eventURL(f.Other)
		}
		switch f.Kind {
		case storage.SuspectBusinessKey:
			lf.Kind = "suspected duplicate"
			lf.Text = fmt.Sprintf("Delivery %d of %s carries the same business key within the window, under another key.", f.Other, f.OtherSource)
		case storage.SuspectCorrelation:
			lf.Kind = "suspected double"
			lf.Text = fmt.Sprintf("Delivery %d of %s has the same booking, amount and currency (rule %s).", f.Other, f.OtherSource, f.Rule)
		case storage.SuspectLateDuplicate:
			lf.Kind = "late duplicate"
			lf.Text = fmt.Sprintf("This key was first seen %s; its claim has expired since.", s.fullTime(f.FirstSeen))
		}
		out = append(out, lf)
	}
	return out
}
