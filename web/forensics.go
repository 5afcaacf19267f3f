package web

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// foresee says in res what a delivery that p describes would be flagged as now: as a
// duplicate of claim's key when res says the claim holds it (duplicateFlags); otherwise
// what the store's look-up finds, or, where business_key_blocks makes it a duplicate of
// the delivery its business key repeats, that alone: not accepted, it takes no other flag.
func (s *Server) foresee(ctx context.Context, res *views.LabResult, claim storage.Claim, p storage.Probe) error {
	if res.Held {
		flags, err := s.duplicateFlags(ctx, claim, p)
		res.Flags, res.Foreseen = flags, err == nil
		return err
	}
	flags, err := s.suspects.WouldFlag(ctx, p)
	if err != nil {
		return err
	}
	res.Flags, res.Foreseen = s.labFlags(flags), true
	if b, ok := p.BlockedBy(flags); ok {
		res.Blocked = true
		res.Claim = fmt.Sprintf("No claim holds this key, but its business key repeats delivery %d's within the window, "+
			"and this source blocks such re-sends: a delivery of this payload now would be a duplicate of it.", b.Other)
		res.Flags = []views.LabFlag{{Kind: "blocked", URL: eventURL(b.Other),
			Text: fmt.Sprintf("Delivery %d of %s carries the same business key under another key: answered duplicate, not handed downstream.",
				b.Other, b.OtherSource)}}
	}
	return nil
}

// duplicateFlags says what a duplicate of claim's key that p describes would be flagged
// as, as intake decides it: a mismatch when its payload hash differs from the claim's,
// and a money mismatch when its amount, currency or status differs from the first
// delivery's too. A first delivery swept by retention has no money to compare with.
func (s *Server) duplicateFlags(ctx context.Context, claim storage.Claim, p storage.Probe) ([]views.LabFlag, error) {
	if p.PayloadHash == claim.PayloadHash {
		return nil, nil
	}
	first, err := s.events.Delivery(ctx, claim.FirstDelivery)
	if errors.Is(err, storage.ErrNotFound) {
		return []views.LabFlag{{Kind: "mismatch", Text: "Its payload differs from the first delivery's, which retention has swept since."}}, nil
	}
	if err != nil {
		return nil, err
	}
	url := eventURL(first.ID)
	flags := []views.LabFlag{{Kind: "mismatch", URL: url,
		Text: fmt.Sprintf("Its payload differs from delivery %d's, the first of this key.", first.ID)}}
	if !first.MoneyTerms().Same(p.MoneyTerms()) {
		flags = append(flags, views.LabFlag{Kind: "money mismatch", URL: url,
			Text: fmt.Sprintf("Its money (%s) differs from delivery %d's (%s).",
				labMoney(p.Amount, p.Currency, p.EventStatus), first.ID, labMoney(first.Amount, first.Currency, first.EventStatus))})
	}
	return flags, nil
}

// labDuplicateOfItem says what p, a duplicate of item j of the same request (first, the
// item that claims the key, or that business_key_blocks made a duplicate), would be
// flagged as, as intake compares the two: a mismatch when its payload differs, and a
// money mismatch when its amount, currency or status does too.
func labDuplicateOfItem(j int, first, p storage.Probe) []views.LabFlag {
	if p.PayloadHash == first.PayloadHash {
		return nil
	}
	flags := []views.LabFlag{{Kind: "mismatch", Text: fmt.Sprintf("Its payload differs from item %d's, the first of this key.", j)}}
	if !first.MoneyTerms().Same(p.MoneyTerms()) {
		flags = append(flags, views.LabFlag{Kind: "money mismatch",
			Text: fmt.Sprintf("Its money (%s) differs from item %d's (%s).",
				labMoney(p.Amount, p.Currency, p.EventStatus), j, labMoney(first.Amount, first.Currency, first.EventStatus))})
	}
	return flags
}

// labMoney words an amount, its currency and an event status for the key lab.
func labMoney(amount, currency, status string) string {
	m := strings.TrimSpace(amount + " " + currency)
	if amount == "" {
		m = "no amount"
	}
	if status == "" {
		return m + ", no status"
	}
	return m + ", status " + status
}

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

// labBusinessInBatch judges item i of a pasted request, res as foreseen from p, against
// the request's earlier items, as intake judges them in the one transaction: an item
// accepted whose business key an earlier accepted item of another key carries, and
// that the database matches with nothing, is a suspected duplicate of that item, or,
// where business_key_blocks, its duplicate.
func labBusinessInBatch(res *views.LabResult, p storage.Probe, i int, first storage.FirstAccepted) {
	if p.Source == "" || p.BusinessKey == "" || p.BusinessWindow <= 0 || res.Held || res.Blocked || !res.Foreseen {
		return
	}
	j, ok := first.Earlier(i, p.BusinessKey)
	switch {
	case !ok:
	case slices.ContainsFunc(res.Flags, func(f views.LabFlag) bool { return f.Kind == "suspected duplicate" }):
		// The database's match is the earlier one, and the one intake names.
	case p.BusinessBlocks:
		res.Blocked = true
		res.Claim = fmt.Sprintf("No claim holds this key, but its business key repeats item %d's of this request, "+
			"and this source blocks such re-sends: a delivery of this payload now would be a duplicate of it.", j)
		res.Flags = []views.LabFlag{{Kind: "blocked",
			Text: fmt.Sprintf("Item %d of this request carries the same business key under another key: answered duplicate, not handed downstream.", j)}}
	default:
		// First, as intake finds business keys before the other flags.
		res.Flags = slices.Insert(res.Flags, 0, views.LabFlag{Kind: "suspected duplicate",
			Text: fmt.Sprintf("Item %d of this request carries the same business key, under another key.", j)})
	}
}
