package main

import (
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
)

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q: want \"Name: value\"", v)
	}
	http.Header(h).Add(strings.TrimSpace(name), strings.TrimSpace(value))
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
	if *source == "" || len(pos) > 1 {
		return errors.New("usage: hookdedup key --source S [FILE] (the payload from FILE or stdin)")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	var body []byte
	if len(pos) == 1 && pos[0] != "-" {
		body, err = os.ReadFile(pos[0])
	} else {
		body, err = io.ReadAll(io.LimitReader(e.stdin, cfg.MaxBody+1))
	}
	if err != nil {
		return fmt.Errorf("reading payload: %w", err)
	}
	sources, db, err := existingSources(ctx, cfg, e)
	if err != nil {
		return err
	}
	if db == nil {
		if db, err = openExisting(cfg, e); err != nil {
			return err
		}
	}
	defer db.Close()
	src, err := findSource(sources, *source)
	if err != nil {
		return err
	}
	der, derr := receiver.Derive(src.Keys, http.Header(headers), body)

	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "source\t%s\n", src.Name)
	if src.Keys.EventID != "" {
		fmt.Fprintf(w, "event id from\t%s\n", src.Keys.EventID)
	}
	if derr != nil {
		w.Flush()
		return fmt.Errorf("no key: %w", derr)
	}
	switch der.Method {
	case storage.MethodEventID:
		fmt.Fprintf(w, "method\tevent id (from %s)\n", der.EventIDFrom)
	default:
		if src.Keys.EventID != "" {
			fmt.Fprintf(w, "method\tderived (the delivery carries no %s)\n", src.Keys.EventID)
		} else {
			fmt.Fprintf(w, "method\tderived from key fields\n")
		}
		for _, f := range der.Fields {
			note := ""
			if !f.Present {
				note = "  (absent)"
			}
			fmt.Fprintf(w, "  %s\t%s%s\n", f.Pointer, f.Value, note)
		}
		fmt.Fprintf(w, "canonical JSON\t%s\n", der.Canonical)
		fmt.Fprintf(w, "sha256\t%s\n", der.Hash)
	}
	fmt.Fprintf(w, "key\t%s\n", der.Key)
	fmt.Fprintf(w, "payload hash\t%s\n", der.PayloadHash)
	c, err := db.Claim(ctx, src.Name, der.Key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		fmt.Fprintf(w, "claimed\tno: a delivery now would be accepted\n")
	case err != nil:
		w.Flush()
		return err
	case c.Held(time.Now()):
		fmt.Fprintf(w, "claimed\tyes: %s, first delivery %d, until %s\n", c.State, c.FirstDelivery, c.ExpiresAt.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "claimed\tno: the claim is %s; a delivery now would be accepted\n", freeWhy(c))
	}
	return w.Flush()
}

func freeWhy(c storage.Claim) string {
	if c.State == storage.StateReleased {
		return "released"
	}
	return "expired since " + c.ExpiresAt.Format(time.RFC3339)
}
