package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// releaseLineProblem says what a release command line lacks, or holds beside what it
// asks for, or "" when it has what a release needs: the usage alone leaves the operator
// to find the difference (a reason of blanks, which counts as none, looks given).
func releaseLineProblem(source, reason string, bulk bool, keys []string) string {
	quoted := func() string {
		q := make([]string, len(keys))
		for i, k := range keys {
			q[i] = strconv.Quote(k)
		}
		return strings.Join(q, ", ")
	}
	switch {
	case source == "":
		return "--source is required"
	case reason == "":
		return "--reason is required (not blank): why, for the audit log"
	case bulk && len(keys) != 0:
		return fmt.Sprintf("a KEY (%s) with --stuck or --state: give the one or the other", quoted())
	case len(keys) == 0 && !bulk:
		return "name the KEY to release, or --stuck or --state for several"
	case len(keys) > 1:
		return fmt.Sprintf("one KEY at a time, not %d (%s); --stuck or --state release several", len(keys), quoted())
	}
	return ""
}

func runRelease(ctx context.Context, args []string, e env) error {
	flags := newFlags("release", e)
	source := flags.fs.String("source", "", "the key's source (required)")
	reason := flags.fs.String("reason", "", "why, for the audit log (required)")
	reprocess := flags.fs.Bool("reprocess", false, "dispatch the stored payload again now, keeping the key claimed")
	state := flags.fs.String("state", "", "release every key of the source in this state (instead of one KEY)")
	stuck := flags.fs.Bool("stuck", false, "release every stuck key of the source (instead of one KEY)")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	bulk := *state != "" || *stuck
	// Trimmed as the console and the API trim it, and kept as checked: the blanks that
	// TrimSpace takes include control characters (a form feed, U+0085) that the check
	// refuses anywhere else.
	*reason = strings.TrimSpace(*reason)
	if problem := releaseLineProblem(*source, *reason, bulk, pos); problem != "" {
		return errors.New(problem + "\nusage: hookdedup release --source S KEY --reason R [--reprocess]\n" +
			"       hookdedup release --source S --stuck|--state STATE --reason R [--reprocess]")
	}
	if p := storage.ReasonProblem(*reason); p != "" {
		return fmt.Errorf("--reason: %s", p)
	}
	if err := (storage.KeyFilter{State: *state, Stuck: *stuck}).Check(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	cfg, db, err := flags.open(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()
	if *reprocess && !slices.ContainsFunc(cfg.Sources, func(s sourceConfig) bool { return s.Name == *source }) {
		// Reprocessed, the key would wait in processing for a dispatcher that has its
		// source, and none of this configuration does.
		return fmt.Errorf("source %q is not in the configuration, so nothing would send a reprocessed key of it downstream: put the source back, or release without --reprocess", *source)
	}
	r := storage.Release{Actor: cliActor(), Reason: *reason, Reprocess: *reprocess, StuckBefore: db.Clock().Add(-cfg.StuckAfter)}
	if bulk {
		// A misspelt source would match no key, and read as a source with nothing stuck.
		if err := knownSource(ctx, db, cfg, *source); err != nil {
			return err
		}
		outcomes, err := db.ReleaseKeys(ctx, storage.KeyFilter{Source: *source, State: *state, Stuck: *stuck, StuckBefore: r.StuckBefore}, r)
		if err != nil {
			return err
		}
		for _, o := range outcomes {
			switch {
			case o.Refused != "":
				fmt.Fprintf(e.stdout, "%s: %s\n", shownKey(o.Source, o.Key), o.Refused.Message())
			case o.Changed:
				fmt.Fprintf(e.stdout, "%s: %s -> %s\n", shownKey(o.Source, o.Key), o.Previous, releasedTo(*reprocess))
			}
		}
		sum := storage.Summarize(outcomes)
		fmt.Fprintf(e.stdout, "%s matched, %d changed, %d refused\n", count(sum.Matched, "key", "keys"), sum.Changed, sum.Refused)
		if storage.ReachedLimit(sum.Matched) {
			fmt.Fprintf(e.stdout, "stopped at %d keys, the most one call takes: more may match; run it again for the rest\n", storage.MaxKeysPerRelease)
		}
		if sum.Refused > 0 {
			return fmt.Errorf("%s could not be released", count(sum.Refused, "key", "keys"))
		}
		return nil
	}
	r.Source, r.Key = *source, pos[0]
	res, err := db.ReleaseKey(ctx, r)
	key := shownKey(*source, pos[0])
	if why, ok := storage.RefusalOf(err); ok {
		return fmt.Errorf("%s: %s", key, why.Message())
	}
	switch {
	case err != nil:
		return err
	case !res.Changed:
		fmt.Fprintf(e.stdout, "%s is already free (%s): nothing changed\n", key, res.Previous)
	case *reprocess && recordOnly(cfg, *source):
		// Nothing is sent: serve's dispatcher settles the key, a few seconds on, unless
		// another replica forwards the source by then. Until then it is in flight.
		fmt.Fprintf(e.stdout, "%s: %s -> processing; the source has no forward_url, so serve records it processed again within seconds, sending nothing\n", key, res.Previous)
	case *reprocess:
		fmt.Fprintf(e.stdout, "%s: %s -> processing; its stored payload will be dispatched again\n", key, res.Previous)
	default:
		fmt.Fprintf(e.stdout, "%s: %s -> released; its next delivery will be accepted\n", key, res.Previous)
	}
	return nil
}

// shownKey names a key as source/key for a terminal, each shown as the console shows
// it: a sender chooses both (a source by posting to it, a key as its event id), and a
// U+202E in either would make the line read as another key's.
func shownKey(source, key string) string { return shownName(source) + "/" + shownName(key) }

// shownName is a sender's key or source as the command line shows it: as the console
// does, with its backslashes doubled too. The console marks its escapes apart from the
// text; here a key sent as the six characters \u202e would read as the one holding
// U+202E, and a bash $'…' of what is shown would name the other one.
func shownName(s string) string { return web.Visible(strings.ReplaceAll(s, `\`, `\\`)) }

// recordOnly reports whether the configuration has source without a forward_url.
func recordOnly(cfg config, source string) bool {
	i := slices.IndexFunc(cfg.Sources, func(s sourceConfig) bool { return s.Name == source })
	return i >= 0 && cfg.Sources[i].ForwardURL == ""
}

func releasedTo(reprocess bool) string {
	if reprocess {
		return "processing"
	}
	return "released"
}

// cliActor names who ran a CLI command, for the audit log.
func cliActor() string {
	if u, err := user.Current(); err == nil {
		return "cli:" + u.Username
	}
	return "cli"
}

// knownSource refuses a source name that is neither configured nor holds a stored key:
// a misspelt --source would otherwise read as a source without keys. A source the
// configuration no longer has may still hold keys, to be listed and released, so only
// a name the database knows nothing of either is refused.
func knownSource(ctx context.Context, db storage.Store, cfg config, name string) error {
	var names []string
	for _, s := range cfg.Sources {
		if s.Name == name {
			return nil
		}
		names = append(names, s.Name)
	}
	held, err := db.ListKeys(ctx, storage.KeyFilter{Source: name, Limit: 1})
	if err != nil || len(held) > 0 {
		return err
	}
	return fmt.Errorf("no source %q: the configuration has none of that name (configured: %s) and the database holds no key of it",
		name, strings.Join(names, ", "))
}

func runKeys(ctx context.Context, args []string, e env) error {
	flags := newFlags("keys", e)
	source := flags.fs.String("source", "", "only this source's keys")
	state := flags.fs.String("state", "", "only keys in this state: processing, processed, failed, released")
	stuck := flags.fs.Bool("stuck", false, "only stuck keys (failed, or processing longer than stuck_after), longest stuck first")
	limit := flags.fs.Int("limit", 100, "at most this many keys")
	before := flags.fs.Int64("before", 0, "only keys older than this id: the next page, as the page before says")
	after := flags.fs.String("after", "", "with --stuck, only the stuck keys after this place: the next page, as the page before says")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if err := noArguments("keys", pos, "--source"); err != nil {
		return err
	}
	if *limit <= 0 {
		return fmt.Errorf("--limit %d: want a number of keys, 1 or more", *limit)
	}
	if *before < 0 {
		return fmt.Errorf("--before %d: want the id the page before gave", *before)
	}
	f := storage.KeyFilter{Source: *source, State: *state, Stuck: *stuck, Before: *before, Limit: *limit}
	if *after != "" {
		c, err := storage.ParseKeyCursor(*after)
		if err != nil {
			return fmt.Errorf("--after: %w", err)
		}
		f.After = c
	}
	if err := f.Check(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	cfg, db, err := flags.open(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()
	now := db.Clock()
	// Every page of a pass through the stuck keys takes its first page's threshold
	// (storage.KeyCursor), as the console's do.
	f.StuckBefore = now.Add(-cfg.StuckAfter)
	if !f.After.IsZero() {
		f.StuckBefore = f.After.StuckBefore
	}
	keys, err := db.ListKeys(ctx, f)
	if err != nil {
		return err
	}
	// The last page of a pass through the stuck keys says how many became stuck during
	// it: they fall among the keys paged already, and support staff would end the pass
	// believing they saw every stuck key.
	// Only processing keys become stuck by time: a pass through the failed ones has none.
	if !f.After.IsZero() && len(keys) < *limit && f.State != storage.StateFailed {
		current, err := db.StuckCounts(ctx, now.Add(-cfg.StuckAfter))
		if err != nil {
			return err
		}
		then, err := db.StuckCounts(ctx, f.StuckBefore)
		if err != nil {
			return err
		}
		if n := storage.BecameStuck(current, then, f.Source); n > 0 {
			defer fmt.Fprintf(e.stderr, "%s stuck after this pass's first page: run again without --after to list them\n",
				count(n, "key became", "keys became"))
		}
	}
	if len(keys) == 0 && f.Source != "" {
		if err := knownSource(ctx, db, cfg, f.Source); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		if f.Before != 0 || !f.After.IsZero() {
			fmt.Fprintln(e.stdout, "no more keys: the page before was the last")
		} else {
			fmt.Fprintln(e.stdout, "no keys match")
		}
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "SOURCE\tKEY\tSTATE\tSINCE\tATTEMPTS\tLAST ERROR\n")
	for _, k := range keys {
		// The key and its source are a sender's, the last error a downstream's: shown as
		// the console shows them, where a tab would also shift the columns.
		fmt.Fprintf(w, "%s\t%s\t%s\t%s ago\t%d\t%s\n", shownName(k.Source), shownName(k.Key), k.State,
			now.Sub(k.UpdatedAt).Round(time.Second), k.Attempts, web.Visible(k.LastError))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// A full page may have more after it. The way on goes to stderr: stdout stays the
	// table that scripts read.
	if len(keys) == *limit {
		last := keys[len(keys)-1]
		next := fmt.Sprintf("--before %d", last.ID)
		if f.Stuck {
			next = "--after " + storage.KeyCursor{UpdatedAt: last.UpdatedAt, ID: last.ID, StuckBefore: f.StuckBefore}.String()
		}
		fmt.Fprintf(e.stderr, "%s listed; there may be more: run again with %s\n", count(len(keys), "key", "keys"), next)
	}
	return nil
}
