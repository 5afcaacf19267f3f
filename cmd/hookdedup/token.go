package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

const tokenUsage = `usage: hookdedup token add USER --name NAME | token list | token revoke ID`

// runToken manages API bearer tokens: each acts as its user, with the user's role.
func runToken(ctx context.Context, args []string, e env) error {
	sub, args, err := subcommand("token", "add, list or revoke", tokenUsage, args, e)
	if sub == "" {
		return err
	}
	flags := newFlags("token "+sub, e)
	// Only add names a token: list and revoke given --name would ignore it, and token
	// revoke 3 --name ci revoked token 3 whatever it was for.
	name := new(string)
	if sub == "add" {
		name = flags.fs.String("name", "", "what the token is for")
	}
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	// The command line is checked whole before the database is opened (which migrates
	// it): a mistaken one changes nothing and names no database.
	want := map[string][]string{"add": {"USER"}, "list": nil, "revoke": {"ID"}}
	names, ok := want[sub]
	if !ok {
		return unknownSubcommand(sub, tokenUsage)
	}
	if p := argsProblem("token "+sub, names, pos, false); p != "" {
		return errors.New(p + "\n" + tokenUsage)
	}
	if sub == "add" && *name != "" {
		if p := storage.TokenNameProblem(*name); p != "" {
			return fmt.Errorf("token add --name: %s", p)
		}
	}
	var id int64
	if sub == "revoke" {
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil {
			return fmt.Errorf("token revoke: %q is not a token id (see token list)", pos[0])
		}
	}
	_, db, err := flags.open(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "add":
		if *name == "" {
			*name = "api"
		}
		tok, meta, err := db.CreateToken(ctx, pos[0], *name, cliActor())
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("no user %q", pos[0])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "token %d for %s (%s); shown once, store it now:\n", meta.ID, meta.UserName, meta.Role)
		if _, err := fmt.Fprintln(e.stdout, tok); err != nil {
			// Shown to no one (stdout on a full disk), it would stay a valid credential
			// that nobody holds, and can never be shown again.
			if rerr := db.RevokeToken(ctx, meta.ID, "", cliActor()); rerr != nil {
				return fmt.Errorf("could not print token %d (%w), nor revoke it (%w): revoke it with hookdedup token revoke %d", meta.ID, err, rerr, meta.ID)
			}
			return fmt.Errorf("could not print token %d (%w); it was revoked, run token add again", meta.ID, err)
		}
		return nil
	case "list":
		list, err := db.Tokens(ctx, "")
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "ID\tUSER\tROLE\tNAME\tCREATED\tREVOKED\n")
		for _, t := range list {
			revoked := "-"
			if !t.RevokedAt.IsZero() {
				revoked = t.RevokedAt.Format(time.RFC3339)
			}
			// The name is an admin's free text, which may hold bidi controls: shown as the
			// console shows it.
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.UserName, t.Role, web.Visible(t.Name), t.CreatedAt.Format(time.RFC3339), revoked)
		}
		return w.Flush()
	default: // revoke
		if err := db.RevokeToken(ctx, id, "", cliActor()); errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("no valid token %d", id)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "revoked token %d\n", id)
		return nil
	}
}
