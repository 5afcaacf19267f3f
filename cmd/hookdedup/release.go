package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func runRelease(ctx context.Context, args []string, e env) error {
	flags := newFlags("release", e)
	source := flags.fs.String("source", "", "the key's source (required)")
	reason := flags.fs.String("reason", "", "why, for the audit log (required)")
	reprocess := flags.fs.Bool("reprocess", false, "dispatch the stored payload again now, keeping the key claimed")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if *source == "" || len(pos) != 1 || strings.TrimSpace(*reason) == "" {
		return errors.New("usage: hookdedup release --source S KEY --reason R [--reprocess]")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	db, err := storage.Open(cfg.Database, storage.Options{Synchronous: cfg.Sync})
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.ReleaseKey(ctx, storage.Release{
		Source: *source, Key: pos[0], Actor: cliActor(), Reason: *reason, Reprocess: *reprocess,
		StuckBefore: time.Now().Add(-cfg.StuckAfter),
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("no such key: %s/%s", *source, pos[0])
	case err != nil:
		return err
	case !res.Changed:
		fmt.Fprintf(e.stdout, "%s/%s is already free (%s): nothing changed\n", *source, pos[0], res.Previous)
	case *reprocess:
		fmt.Fprintf(e.stdout, "%s/%s: %s -> processing; its stored payload will be dispatched again\n", *source, pos[0], res.Previous)
	default:
		fmt.Fprintf(e.stdout, "%s/%s: %s -> released; its next delivery will be accepted\n", *source, pos[0], res.Previous)
	}
	return nil
}

// cliActor names who ran a CLI command, for the audit log.
func cliActor() string {
	if u, err := user.Current(); err == nil {
		return "cli:" + u.Username
	}
	return "cli"
}

func runKeys(ctx context.Context, args []string, e env) error {
	return errors.New("keys: not implemented yet")
}
