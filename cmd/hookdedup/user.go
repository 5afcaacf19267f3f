package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
)

// minPassword is the shortest password user add accepts.
const minPassword = 8

func runUserAdd(ctx context.Context, args []string, e env) error {
	flags := newFlags("user add", e)
	role := flags.fs.String("role", storage.RoleViewer, "viewer, operator or admin")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return errors.New("usage: hookdedup user add NAME --role viewer|operator|admin (password on stdin)")
	}
	if !storage.ValidRole(*role) {
		return fmt.Errorf("--role %q: want viewer, operator or admin", *role)
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	// The password comes from stdin, never the command line, where ps and shell
	// history would show it.
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("reading password from stdin: nothing there (pipe it in: echo \"$PW\" | hookdedup user add ...)")
	}
	pw := strings.TrimRight(line, "\r\n")
	if len(pw) < minPassword {
		return fmt.Errorf("password must be at least %d characters", minPassword)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	db, err := cfg.openDB()
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.CreateUser(ctx, storage.User{Name: pos[0], Role: *role, PasswordHash: string(hash)}); err != nil {
		if errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("user %q already exists", pos[0])
		}
		return err
	}
	fmt.Fprintf(e.stdout, "added user %s (%s)\n", pos[0], *role)
	return nil
}
