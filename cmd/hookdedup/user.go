package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
)

const userUsage = `usage: hookdedup user add NAME --role viewer|operator|admin   (password on stdin)
       hookdedup user list
       hookdedup user role NAME viewer|operator|admin
       hookdedup user password NAME                          (new password on stdin)
       hookdedup user remove NAME`

// runUser manages console users. Every change, add included, is written to the audit log, by
// cli:<login name>; the console's sessions of a user see a change at their next request.
func runUser(ctx context.Context, args []string, e env) error {
	sub, args, err := subcommand("user", "add, list, role, password or remove", userUsage, args, e)
	if sub == "" {
		return err
	}
	if sub == "add" {
		return runUserAdd(ctx, args, e)
	}
	flags := newFlags("user "+sub, e)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	want := map[string][]string{"list": nil, "role": {"NAME", "ROLE"}, "password": {"NAME"}, "remove": {"NAME"}}
	names, ok := want[sub]
	if !ok {
		return unknownSubcommand(sub, userUsage)
	}
	if p := argsProblem("user "+sub, names, pos, sub == "password"); p != "" {
		return errors.New(p + "\n" + userUsage)
	}
	if sub == "role" && !storage.ValidRole(pos[1]) {
		return fmt.Errorf("role %q: want viewer, operator or admin", pos[1])
	}
	var hash []byte
	if sub == "password" {
		// Read and hashed before the database is opened (which migrates it), so that a
		// refused password changes nothing at all, as in user add.
		if hash, err = readPassword(e); err != nil {
			return err
		}
	}
	_, db, err := flags.open(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "list":
		users, err := db.Users(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "NAME\tROLE\tADDED\n")
		for _, u := range users {
			fmt.Fprintf(w, "%s\t%s\t%s\n", u.Name, u.Role, u.CreatedAt.Format(time.RFC3339))
		}
		return w.Flush()
	case "role":
		previous, err := db.SetUserRole(ctx, pos[0], pos[1], cliActor())
		if err != nil {
			return userError(pos[0], err)
		}
		if previous == pos[1] {
			fmt.Fprintf(e.stdout, "%s is already %s: nothing changed\n", pos[0], pos[1])
			return nil
		}
		fmt.Fprintf(e.stdout, "%s: %s -> %s\n", pos[0], previous, pos[1])
	case "password":
		if err := db.SetUserPassword(ctx, pos[0], string(hash), cliActor()); err != nil {
			return userError(pos[0], err)
		}
		fmt.Fprintf(e.stdout, "new password set for %s; their console sessions have ended\n", pos[0])
	case "remove":
		if err := db.DeleteUser(ctx, pos[0], cliActor()); err != nil {
			return userError(pos[0], err)
		}
		fmt.Fprintf(e.stdout, "removed user %s; their console sessions and API tokens no longer work\n", pos[0])
	}
	return nil
}

// subcommand splits the subcommand of user or token (cmd) off args; subs names them for
// a message. It answers help itself, returning sub "" and no error.
//
// A flag where the subcommand belongs is refused, as audit refuses it. Read as the
// subcommand, it would name none, and would not be applied: "token --database a.db
// list" would look for ./hookdedup.db instead, and open (and migrate) it where it
// exists. The flags stay after the subcommand, whose own they may be (user add --role,
// token add --name). The refusal is a usage error, exit 2: nothing was run.
func subcommand(cmd, subs, usage string, args []string, e env) (sub string, rest []string, err error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%s: which subcommand? %s\n%s", cmd, subs, usage)
	}
	switch sub = args[0]; {
	case sub == "help" || sub == "-h" || sub == "-help" || sub == "--help":
		fmt.Fprintln(e.stdout, usage)
		return "", nil, nil
	case strings.HasPrefix(sub, "-") && sub != "-":
		// The flag's name only: its value may hold a password (--database=postgres://…).
		name, _, _ := strings.Cut(sub, "=")
		fmt.Fprintf(e.stderr, "hookdedup %s: flag %s stands before the subcommand: name the subcommand (%s) first, then the flags, "+
			"e.g. hookdedup %s list --database FILE\n%s\n", cmd, name, subs, cmd, usage)
		return "", nil, flag.ErrHelp
	}
	return sub, args[1:], nil
}

// unknownSubcommand names a subcommand that user or token does not have, as audit
// names it: the usage alone leaves a typo to be found. A database URL or connection
// string given there by mistake is not shown: it may hold a password.
func unknownSubcommand(sub, usage string) error {
	shown := strconv.Quote(sub)
	if isPostgres(sub) || serverForm(sub) != "" {
		shown = "(a database connection string, not shown)"
	}
	return fmt.Errorf("unknown subcommand %s\n%s", shown, usage)
}

// argsProblem says what cmd's arguments pos lack or have too many of, given the names
// of those it takes ("NAME", "ROLE"), or "" when their count is right. hidden: an
// extra argument is not quoted, as it may be a password typed where stdin was meant.
func argsProblem(cmd string, names, pos []string, hidden bool) string {
	switch {
	case len(pos) < len(names):
		missing := names[len(pos):]
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return fmt.Sprintf("%s: %s %s missing", cmd, strings.Join(missing, " and "), verb)
	case len(pos) > len(names) && hidden:
		return fmt.Sprintf("%s takes %s only; %d more argument(s) given, not shown: a password is read from stdin, never from the command line",
			cmd, strings.Join(names, " and "), len(pos)-len(names))
	case len(pos) > len(names) && len(names) == 0:
		return fmt.Sprintf("%s takes no argument; %s is one", cmd, shownArg(pos[0]))
	case len(pos) > len(names):
		return fmt.Sprintf("%s takes %s; %s is one too many", cmd, strings.Join(names, " and "), shownArg(pos[len(names)]))
	}
	return ""
}

// shownArg is an argument as an error quotes it; a database connection string, which
// may hold a password anywhere, is named for what it is, not shown.
func shownArg(a string) string {
	if isPostgres(a) || serverForm(a) != "" {
		return "(a database connection string, not shown)"
	}
	return strconv.Quote(a)
}

// userError words the refusals of a change to a user for the command line.
func userError(name string, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("no user %q", name)
	case errors.Is(err, storage.ErrLastAdmin):
		return fmt.Errorf("%s is the only admin: make another user admin first", name)
	}
	return err
}

// readPassword reads a new password from stdin, never the command line, where ps and
// shell history would show it, and returns its bcrypt hash.
func readPassword(e env) ([]byte, error) {
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return nil, errors.New("reading password from stdin: nothing there (pipe it in: echo \"$PW\" | hookdedup user ...)")
	}
	pw := strings.TrimRight(line, "\r\n")
	if err := storage.CheckPassword(pw); err != nil {
		return nil, err
	}
	return bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
}

func runUserAdd(ctx context.Context, args []string, e env) error {
	flags := newFlags("user add", e)
	role := flags.fs.String("role", storage.RoleViewer, "viewer, operator or admin")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if p := argsProblem("user add", []string{"NAME"}, pos, true); p != "" {
		if len(pos) > 1 {
			p += " (a role goes with --role)"
		}
		return errors.New(p + "\nusage: hookdedup user add NAME --role viewer|operator|admin (password on stdin)")
	}
	if err := storage.CheckUserName(pos[0]); err != nil {
		return fmt.Errorf("user name %q: %w", pos[0], err)
	}
	if !storage.ValidRole(*role) {
		return fmt.Errorf("--role %q: want viewer, operator or admin", *role)
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	hash, err := readPassword(e)
	if err != nil {
		return err
	}
	// The one command besides serve that may create the database: adding the first
	// admin before the first start is how a new install begins. Only an admin: serve
	// makes the first admin only where there is no user at all, so a first viewer
	// would leave no one able to administer the server. A user of another role needs
	// a database that exists, and an admin in it.
	firstUser := errors.New("the first user must be an admin (--role admin): serve creates its admin only " +
		"when there is no user at all, and without one no one could manage users or sources")
	db, err := cfg.openDB(ctx, cliLogger(e), *role != storage.RoleAdmin, false)
	if errors.Is(err, storage.ErrNoDatabase) {
		return firstUser
	}
	if err != nil {
		return err
	}
	defer db.Close()
	if *role != storage.RoleAdmin {
		n, err := db.CountUsers(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return firstUser
		}
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: pos[0], Role: *role, PasswordHash: string(hash)}, cliActor()); err != nil {
		var taken *storage.UserNameTakenError
		if errors.As(err, &taken) {
			return taken // names the existing user, whose letter case may differ
		}
		return err
	}
	fmt.Fprintf(e.stdout, "added user %s (%s)\n", pos[0], *role)
	return nil
}
