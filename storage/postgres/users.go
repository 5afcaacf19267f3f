package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// CreateUser adds a user and writes the audit row, by actor, in the same transaction.
// Returns a *storage.UserNameTakenError (ErrExists) if a user has the name, letter case
// aside.
func (db *DB) CreateUser(ctx context.Context, u storage.User, actor string) (storage.User, error) {
	if !storage.ValidRole(u.Role) {
		return storage.User{}, fmt.Errorf("create user %q: unknown role %q", u.Name, u.Role)
	}
	if !textOK(u.Name) {
		return storage.User{}, fmt.Errorf("create user %q: a user name cannot hold a NUL byte or bytes that are not UTF-8", u.Name)
	}
	u.CreatedAt = db.Now().UTC().Truncate(time.Millisecond)
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		// Under usersLock, as every change of users: two replicas adding op1 and OP1
		// at once would each find the other's name free.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, db.locks.id(usersLock)); err != nil {
			return err
		}
		// lower() under the C collation folds A to Z alone, as SQLite's does: the
		// engines take the same names for one. Of users made before the rule who
		// share a name so, the one of the very name is told.
		var existing string
		err := tx.QueryRow(ctx, `SELECT name FROM users WHERE lower(name COLLATE "C") = lower($1 COLLATE "C")
			ORDER BY name = $1 DESC, name COLLATE "C" LIMIT 1`, u.Name).Scan(&existing)
		if err == nil {
			return &storage.UserNameTakenError{Name: u.Name, Existing: existing}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		err = tx.QueryRow(ctx,
			`INSERT INTO users (name, role, password_hash, created_at, must_change_password) VALUES ($1, $2, $3, $4, $5)
			RETURNING id`,
			u.Name, u.Role, u.PasswordHash, millis(u.CreatedAt), u.MustChangePassword).Scan(&u.ID)
		if isUniqueViolation(err) {
			return &storage.UserNameTakenError{Name: u.Name, Existing: u.Name}
		}
		if err != nil {
			return err
		}
		return db.insertAudit(ctx, tx, storage.AuditEntry{At: u.CreatedAt, Actor: actor, Action: "add user", Reason: u.Name + " as " + u.Role})
	})
	if err != nil {
		return storage.User{}, fmt.Errorf("create user %q: %w", u.Name, err)
	}
	return u, nil
}

// UserByName returns the user with the given name. Returns ErrNotFound if there is none.
func (db *DB) UserByName(ctx context.Context, name string) (storage.User, error) {
	if !textOK(name) {
		// PostgreSQL would refuse the parameter; no stored name holds such bytes.
		return storage.User{}, fmt.Errorf("user %q: %w", name, storage.ErrNotFound)
	}
	var u storage.User
	var created int64
	err := db.pool.QueryRow(ctx,
		`SELECT id, name, role, password_hash, created_at, must_change_password FROM users WHERE name = $1`, name).
		Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created, &u.MustChangePassword)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.User{}, fmt.Errorf("user %q: %w", name, storage.ErrNotFound)
	}
	if err != nil {
		return storage.User{}, fmt.Errorf("user %q: %w", name, err)
	}
	u.CreatedAt = fromMillis(created)
	return u, nil
}

// CountUsers returns how many users exist.
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// SetUserRole gives a user another role, ends their console sessions, and writes the
// audit row in the same transaction. Returns the previous role (unchanged, and nothing
// written, when it was already role), ErrNotFound for an unknown user and ErrLastAdmin
// when role would take the last admin's rights away.
func (db *DB) SetUserRole(ctx context.Context, name, role, actor string) (previous string, err error) {
	if !storage.ValidRole(role) {
		return "", fmt.Errorf("change role of %q: unknown role %q", name, role)
	}
	err = db.changeUser(ctx, name, actor, func(tx pgx.Tx, u storage.User) (storage.AuditEntry, error) {
		previous = u.Role
		if u.Role == role {
			return storage.AuditEntry{}, nil
		}
		if u.Role == storage.RoleAdmin {
			if err := lastAdmin(ctx, tx); err != nil {
				return storage.AuditEntry{}, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET role = $1 WHERE id = $2`, role, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		if _, err := endSessions(ctx, tx, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		return storage.AuditEntry{Action: "change role", Reason: name + " to " + role, PreviousState: u.Role}, nil
	})
	if err != nil {
		return "", fmt.Errorf("change role of %q: %w", name, err)
	}
	return previous, nil
}

// SetUserPassword replaces a user's password hash (bcrypt) with one the user chose, or
// the operator on the command line: it is not one-time, and clears MustChangePassword.
// It ends the user's console sessions and writes the audit row in the same transaction.
// Returns ErrNotFound for an unknown user.
func (db *DB) SetUserPassword(ctx context.Context, name, hash, actor string) error {
	return db.setPassword(ctx, name, hash, actor, false)
}

// SetOneTimePassword is SetUserPassword for a password chosen for the user by someone
// else: it sets MustChangePassword, so that the console asks the user for their own at
// their next sign-in.
func (db *DB) SetOneTimePassword(ctx context.Context, name, hash, actor string) error {
	return db.setPassword(ctx, name, hash, actor, true)
}

func (db *DB) setPassword(ctx context.Context, name, hash, actor string, oneTime bool) error {
	err := db.changeUser(ctx, name, actor, func(tx pgx.Tx, u storage.User) (storage.AuditEntry, error) {
		if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1, must_change_password = $2 WHERE id = $3`,
			hash, oneTime, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		if _, err := endSessions(ctx, tx, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		reason := name
		if oneTime {
			reason += ", one-time: to be changed at the next sign-in"
		}
		return storage.AuditEntry{Action: "set password", Reason: reason}, nil
	})
	if err != nil {
		return fmt.Errorf("set password of %q: %w", name, err)
	}
	return nil
}

// DeleteUser removes a user, with their API tokens and console sessions, and writes the
// audit row in the same transaction. Returns ErrNotFound for an unknown user and
// ErrLastAdmin for the last admin.
func (db *DB) DeleteUser(ctx context.Context, name, actor string) error {
	err := db.changeUser(ctx, name, actor, func(tx pgx.Tx, u storage.User) (storage.AuditEntry, error) {
		if u.Role == storage.RoleAdmin {
			if err := lastAdmin(ctx, tx); err != nil {
				return storage.AuditEntry{}, err
			}
		}
		// Tokens and sessions go by ON DELETE CASCADE.
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		return storage.AuditEntry{Action: "remove user", Reason: name, PreviousState: u.Role}, nil
	})
	if err != nil {
		return fmt.Errorf("remove user %q: %w", name, err)
	}
	return nil
}

// changeUser runs change, a write concerning the named user (their row, their tokens,
// their sessions), inside one write transaction and appends the audit row it returns,
// by actor; an entry without an Action means nothing changed. Returns ErrNotFound for
// an unknown user.
//
// The transaction takes usersLock before it reads the user, so the changes of users
// are made one at a time across replicas, each reading what the one before it
// committed (a statement of a READ COMMITTED transaction sees every commit made before
// it began). Without it, two replicas each removing one of two admins at once would
// both count two admins and leave none.
func (db *DB) changeUser(ctx context.Context, name, actor string, change func(pgx.Tx, storage.User) (storage.AuditEntry, error)) error {
	if !textOK(name) {
		return storage.ErrNotFound
	}
	return db.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, db.locks.id(usersLock)); err != nil {
			return err
		}
		var u storage.User
		err := tx.QueryRow(ctx, `SELECT id, name, role FROM users WHERE name = $1`, name).Scan(&u.ID, &u.Name, &u.Role)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.ErrNotFound
		}
		if err != nil {
			return err
		}
		e, err := change(tx, u)
		if err != nil || e.Action == "" {
			return err
		}
		e.Actor = actor
		return db.insertAudit(ctx, tx, e)
	})
}

// lastAdmin returns ErrLastAdmin if at most one admin is left. Its caller holds
// usersLock.
func lastAdmin(ctx context.Context, tx pgx.Tx) error {
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = $1`, storage.RoleAdmin).Scan(&n); err != nil {
		return err
	}
	if n <= 1 {
		return storage.ErrLastAdmin
	}
	return nil
}

// Users returns every user, by name. PasswordHash is left empty.
func (db *DB) Users(ctx context.Context) ([]storage.User, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, name, role, created_at, must_change_password FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []storage.User
	for rows.Next() {
		var u storage.User
		var created int64
		if err := rows.Scan(&u.ID, &u.Name, &u.Role, &created, &u.MustChangePassword); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.CreatedAt = fromMillis(created)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}
