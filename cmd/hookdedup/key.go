package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q: want \"Name: value\"", v)
	}
	// Trimmed as net/http trims a header it receives: spaces and tabs only.
	http.Header(h).Add(strings.TrimSpace(name), strings.Trim(value, " \t"))
	return nil
}

func findSource(sources []receiver.Source, name string) (receiver.Source, error) {
	var names []string
	for _, s := range sources {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return receiver.Source{}, fmt.Errorf("no source %q (configured: %s)", name, strings.Join(names, ", "))
}

func runKey(ctx context.Context, args []string, e env) error {
	flags := newFlags("key", e)
	source := flags.fs.String("source", "", "the source whose rules derive the key (required)")
	headers := headerFlags{}
	flags.fs.Var(headers, "header", `a delivery header, "Name: value" (repeatable), for event ids taken from headers`)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	const keyUsage = "usage: hookdedup key --source S [FILE] (the payload from FILE or stdin)"
	switch {
	case *source == "":
		return errors.New("--source is required: the source whose rules derive the key\n" + keyUsage)
	case len(pos) > 1:
		return fmt.Errorf("key takes one FILE at most; %q is one too many\n%s", pos[1], keyUsage)
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	// Read as intake reads, from a file or stdin alike: max_body bytes and one more,
	// which tells a payload intake refuses (413) from one it takes, without holding the
	// rest. A file's size, when it has one, says how far over it is.
	in, size := e.stdin, int64(-1)
	if len(pos) == 1 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("reading payload: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		in = f
	}
	body, err := io.ReadAll(io.LimitReader(in, cfg.MaxBody+1))
	if err != nil {
		return fmt.Errorf("reading payload: %w", err)
	}
	sources, db, err := existingSources(ctx, cfg, e, false)
	if err != nil {
		return err
	}
	if db == nil {
		if db, err = openExisting(ctx, cfg, e); err != nil {
			return err
		}
	}
	defer db.Close()
	src, err := findSource(sources, *source)
	if err != nil {
		return err
	}
	// After the source, before anything else, as intake checks them: an unknown source
	// is a 404 whatever the body, and an oversized body is refused unread, so neither its
	// key nor its JSON matters.
	if n := int64(len(body)); n > cfg.MaxBody {
		what := fmt.Sprintf("%d bytes or more", n)
		if size > cfg.MaxBody {
			what = fmt.Sprintf("%d bytes", size)
		}
		return fmt.Errorf("the payload is %s, over max_body (%d bytes): intake would answer 413 and key nothing", what, cfg.MaxBody)
	}
	// Then the signature, whose check of the message id needs no secret: a scheme that
	// signs the id refuses a delivery without it, and a key derived for it from the key
	// fields is one that intake never gives.
	if err := src.MessageIDProblem(http.Header(headers)); err != nil {
		return fmt.Errorf("%w; give it with --header", err)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "source\t%s\n", src.Name)
	if from := src.Keys.EventIDText(); from != "" {
		fmt.Fprintf(w, "event id from\t%s\n", from)
	}
	if src.Batch == "" {
		// The JSON intake keys: a form-encoded delivery's is its payload field.
		event, err := src.Event(http.Header(headers), body)
		if err != nil {
			w.Flush()
			return err
		}
		der, noID, derr := receiver.DeriveExplained(src.Keys, http.Header(headers), event)
		if derr != nil {
			w.Flush()
			return fmt.Errorf("no key: %w", derr)
		}
		blocked, _, err := blockedBy(ctx, db, &src, http.Header(headers), event)
		if err != nil {
			w.Flush()
			return err
		}
		if err := explainKey(ctx, w, db, src, der, noID, "", -1, blocked); err != nil {
			w.Flush()
			return err
		}
		return w.Flush()
	}

	// A batch: every item explained on its own, as intake keys it; the first item
	// that intake would refuse refuses the whole request, and is the error.
	items, envelope, err := receiver.SplitBatch(body, src.Batch, src.Item, src.MaxBatchItems)
	if err != nil {
		w.Flush()
		return fmt.Errorf("batch: %w", err)
	}
	at := src.Batch
	if at == receiver.WholeBody {
		at += " (the whole body)"
	}
	fmt.Fprintf(w, "batch\t%s at %s%s\n", count(len(items), "item", "items"), at, itemNote(src.Item))
	explainEnvelope(w, envelope)
	iv, perItem := src.Verifier.(receiver.ItemVerifier)
	// What intake would refuse the request for, found first, as intake finds it: every
	// item's signature before any item's key. A refused request claims nothing, so no
	// item is then said to be accepted or a duplicate.
	sigs, ders, noIDs, derrs := make([]error, len(items)), make([]storage.Derivation, len(items)), make([]string, len(items)), make([]error, len(items))
	var refusedSig, refusedKey error
	for i, item := range items {
		if perItem {
			sigs[i] = iv.VerifyItem(item)
			if sigs[i] != nil {
				refusedSig = cmp.Or(refusedSig, fmt.Errorf("item %d: signature: %w", i, sigs[i]))
			}
		}
		ders[i], noIDs[i], derrs[i] = receiver.DeriveExplained(src.Keys, http.Header(headers), item)
		if derrs[i] != nil {
			refusedKey = cmp.Or(refusedKey, fmt.Errorf("item %d: no key: %w", i, derrs[i]))
		}
	}
	refused := cmp.Or(refusedSig, refusedKey)
	firstWith := map[string]int{} // the item each key was first derived in
	firstBusiness := storage.FirstAccepted{}
	for i := range items {
		fmt.Fprintf(w, "\nitem %d\n", i)
		if perItem {
			if sigs[i] != nil {
				fmt.Fprintf(w, "  signature\tfails: %v\n", sigs[i])
			} else {
				fmt.Fprintf(w, "  signature\tverifies\n")
			}
		}
		if derrs[i] != nil {
			fmt.Fprintf(w, "  key\tnone: %v\n", derrs[i])
			continue
		}
		earlier, ok := firstWith[ders[i].Key]
		if !ok {
			earlier, firstWith[ders[i].Key] = -1, i
		}
		if refused != nil {
			earlier = refusedRequest
		}
		blocked := ""
		if earlier == -1 {
			held, err := heldNow(ctx, db, src.Name, ders[i].Key)
			if err != nil {
				w.Flush()
				return err
			}
			var businessKey string
			if !held {
				if blocked, businessKey, err = blockedBy(ctx, db, &src, http.Header(headers), items[i]); err != nil {
					w.Flush()
					return err
				}
			}
			// Intake claims the items in order, in one transaction: an item accepted under
			// its own key leaves its business key for the items after it.
			if !held && blocked == "" && businessKey != "" {
				if j, ok := firstBusiness.Earlier(i, businessKey); ok && src.BusinessKeyBlocks {
					blocked = fmt.Sprintf("item %d's of this request", j)
				}
			}
		}
		if err := explainKey(ctx, w, db, src, ders[i], noIDs[i], "  ", earlier, blocked); err != nil {
			w.Flush()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if refused != nil {
		return fmt.Errorf("the request would be refused whole: %w", refused)
	}
	return nil
}

// explainEnvelope writes what the request says besides its events, as the header each
// item's hand-off carries: its ASCII spelling is also safe to print.
func explainEnvelope(w io.Writer, envelope string) {
	if name, value := storage.BatchEnvelopeHandOff(envelope); name != "" {
		fmt.Fprintf(w, "envelope\thanded downstream with each item as %s: %s\n", name, value)
	}
}

// itemNote says where the event sits inside each element of a batch.
func itemNote(item string) string {
	if item == "" {
		return ""
	}
	return ", each at " + item
}

// refusedRequest, as explainKey's earlier, says that intake refuses the item's request
// whole: nothing of it is claimed or stored as a duplicate.
const refusedRequest = -2

// heldNow reports whether a claim holds source's key now.
func heldNow(ctx context.Context, db storage.Store, source, key string) (bool, error) {
	c, err := db.Claim(ctx, source, key)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil && c.Held(db.Clock()), err
}

// blockedBy says whose duplicate business_key_blocks makes a delivery of event to src
// ("delivery 41's"), were its key free: the accepted delivery of another key that carries
// its business key within the window, as intake's claim finds it; "" when src does not
// block or none does. It also returns the event's business key, "" for none.
func blockedBy(ctx context.Context, db storage.Store, src *receiver.Source, h http.Header, event []byte) (by, businessKey string, err error) {
	if len(src.BusinessKey) == 0 {
		return "", "", nil
	}
	p, err := receiver.ProbeFor(src, h, event, db.Clock())
	if err != nil || p.BusinessKey == "" {
		return "", "", nil // no key (said where the key is explained), or no business key
	}
	if !p.BusinessBlocks {
		return "", p.BusinessKey, nil
	}
	flags, err := db.WouldFlag(ctx, p)
	if err != nil {
		return "", "", err
	}
	if f, ok := p.BlockedBy(flags); ok {
		return fmt.Sprintf("delivery %d's", f.Other), p.BusinessKey, nil
	}
	return "", p.BusinessKey, nil
}

// explainKey writes how der was derived (noID: why no event id was used, for a derived
// key) and whether its key is claimed, each line starting with indent. The payload's
// text in it (the event id, the fields' values, the canonical JSON) is a sender's, shown
// as the console's key lab shows it. earlier is the item of the same request that has the same key
// before this one, -1 for none: intake claims the key with that item, in the same
// transaction, so this one is its duplicate whatever the database holds now;
// refusedRequest for an item of a request that intake refuses whole. blocked, when the
// key is free, names what business_key_blocks makes a delivery of it a duplicate of
// (blockedBy).
func explainKey(ctx context.Context, w io.Writer, db storage.Store, src receiver.Source, der storage.Derivation, noID, indent string, earlier int, blocked string) error {
	switch der.Method {
	case storage.MethodEventID:
		fmt.Fprintf(w, "%smethod\tevent id (from %s)\n", indent, web.Visible(der.EventIDFrom))
	default:
		if noID != "" {
			fmt.Fprintf(w, "%smethod\tderived from key fields (%s)\n", indent, noID)
		} else {
			fmt.Fprintf(w, "%smethod\tderived from key fields\n", indent)
		}
		for _, f := range der.Fields {
			note := ""
			if !f.Present {
				note = "  (absent)"
			}
			fmt.Fprintf(w, "%s  %s\t%s%s\n", indent, web.Visible(f.Pointer), web.Visible(f.Value), note)
		}
		fmt.Fprintf(w, "%scanonical JSON\t%s\n", indent, web.Visible(der.Canonical))
		fmt.Fprintf(w, "%ssha256\t%s\n", indent, der.Hash)
	}
	fmt.Fprintf(w, "%skey\t%s\n", indent, shownName(der.Key))
	fmt.Fprintf(w, "%spayload hash\t%s\n", indent, der.PayloadHash)
	c, err := db.Claim(ctx, src.Name, der.Key)
	now := db.Clock()
	switch {
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return err
	case earlier == refusedRequest && err == nil && c.Held(now):
		fmt.Fprintf(w, "%sclaimed\tyes: %s, first delivery %d; this request would not be stored as its duplicate, as intake refuses it whole\n", indent, c.State, c.FirstDelivery)
	case earlier == refusedRequest:
		fmt.Fprintf(w, "%sclaimed\tno; this request would not claim it, as intake refuses it whole\n", indent)
	case err == nil && c.Held(now):
		until := "until " + c.ExpiresAt.Format(time.RFC3339)
		if !c.ExpiresAt.After(now) {
			until = "while it is handed downstream (its ttl ended " + c.ExpiresAt.Format(time.RFC3339) + ")"
		}
		fmt.Fprintf(w, "%sclaimed\tyes: %s, first delivery %d, %s\n", indent, c.State, c.FirstDelivery, until)
	case earlier >= 0:
		fmt.Fprintf(w, "%sclaimed\tno, but item %d of this request has the same key and claims it first: this item would be its duplicate\n", indent, earlier)
	case blocked != "":
		fmt.Fprintf(w, "%sclaimed\tno, but its business key repeats %s under another key, and this source blocks such re-sends (business_key_blocks): "+
			"a delivery now would be its duplicate, not handed downstream\n", indent, blocked)
	case err != nil: // storage.ErrNotFound
		fmt.Fprintf(w, "%sclaimed\tno: a delivery now would be accepted\n", indent)
	default:
		fmt.Fprintf(w, "%sclaimed\tno: the claim is %s; a delivery now would be accepted\n", indent, freeWhy(c))
	}
	return nil
}

func freeWhy(c storage.Claim) string {
	if c.State == storage.StateReleased {
		return "released"
	}
	return "expired since " + c.ExpiresAt.Format(time.RFC3339)
}
