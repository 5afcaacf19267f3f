package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// CreateUser adds a user and writes the audit row, by actor, in the same transaction.
// Returns a *storage.UserNameTakenError (ErrExists) if a user has the name, letter case
// aside.
func (db *DB) CreateUser(ctx context.Context, u storage.User, actor string) (storage.User, error) {
	if !storage.ValidRole(u.Role) {
		return storage.User{}, fmt.Errorf("create user %q: unknown role %q", u.Name, u.Role)
	}
	u.CreatedAt = db.Now().UTC().Truncate(time.Millisecond)
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		// SQLite's lower() folds A to Z alone, as the PostgreSQL engine's does under
		// the C collation: the engines take the same names for one. Of users made
		// before the rule who share a name so, the one of the very name is told.
		var existing string
		err := tx.QueryRowContext(ctx, `SELECT name FROM users WHERE lower(name) = lower(?)
			ORDER BY name = ? DESC, name LIMIT 1`, u.Name, u.Name).Scan(&existing)
		if err == nil {
			return &storage.UserNameTakenError{Name: u.Name, Existing: existing}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO users (name, role, password_hash, created_at, must_change_password) VALUES (?, ?, ?, ?, ?)`,
			u.Name, u.Role, u.PasswordHash, millis(u.CreatedAt), u.MustChangePassword)
		if err != nil {
			if strings.Contains(err.Error(), "UNIQUE constraint failed") {
				return &storage.UserNameTakenError{Name: u.Name, Existing: u.Name}
			}
			return err
		}
		if u.ID, err = res.LastInsertId(); err != nil {
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
	var u storage.User
	var created int64
	err := db.read.QueryRowContext(ctx,
		`SELECT id, name, role, password_hash, created_at, must_change_password FROM users WHERE name = ?`, name).
		Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created, &u.MustChangePassword)
	if errors.Is(err, sql.ErrNoRows) {
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
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// Setting returns a stored setting. Returns ErrNotFound if it was never set.
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := db.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("setting %q: %w", name, storage.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return v, nil
}

// SettingOrInit returns the stored setting, first storing init() under that name if it
// was never set. Two processes racing here agree on one value: the first insert wins.
func (db *DB) SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error) {
	if v, err := db.Setting(ctx, name); err == nil || !errors.Is(err, storage.ErrNotFound) {
		return v, err
	}
	v, err := init()
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	if _, err := db.writeExec(ctx,
		`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, v); err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return db.Setting(ctx, name)
}

// SetSetting stores value under name, in place of what was stored there.
func (db *DB) SetSetting(ctx context.Context, name, value string) error {
	if _, err := db.writeExec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value); err != nil {
		return fmt.Errorf("set setting %q: %w", name, err)
	}
	return nil
}

// SetUserRole gives a user another role, ends their console sessions, and writes the
// audit row in the same transaction. Returns the previous role (unchanged, and nothing
// written, when it was already role), ErrNotFound for an unknown user and ErrLastAdmin
// when role would take the last admin's rights away.
func (db *DB) SetUserRole(ctx context.Context, name, role, actor string) (previous string, err error) {
	if !storage.ValidRole(role) {
		return "", fmt.Errorf("change role of %q: unknown role %q", name, role)
	}
	err = db.changeUser(ctx, name, actor, func(tx *sql.Tx, u storage.User) (storage.AuditEntry, error) {
		previous = u.Role
		if u.Role == role {
			return storage.AuditEntry{}, nil
		}
		if u.Role == storage.RoleAdmin {
			if err := lastAdmin(ctx, tx); err != nil {
				return storage.AuditEntry{}, err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, role, u.ID); err != nil {
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
	err := db.changeUser(ctx, name, actor, func(tx *sql.Tx, u storage.User) (storage.AuditEntry, error) {
		if _, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, must_change_password = ? WHERE id = ?`,
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
// audit row in the same transaction. Returns ErrNotFound for an
// unknown user and ErrLastAdmin for the last admin.
func (db *DB) DeleteUser(ctx context.Context, name, actor string) error {
	err := db.changeUser(ctx, name, actor, func(tx *sql.Tx, u storage.User) (storage.AuditEntry, error) {
		if u.Role == storage.RoleAdmin {
			if err := lastAdmin(ctx, tx); err != nil {
				return storage.AuditEntry{}, err
			}
		}
		// Tokens and sessions go by ON DELETE CASCADE (foreign keys are on for every
		// connection).
		if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		return storage.AuditEntry{Action: "remove user", Reason: name, PreviousState: u.Role}, nil
	})
	if err != nil {
		return fmt.Errorf("remove user %q: %w", name, err)
	}
	return nil
}

// changeUser runs change, a write concerning the named user (their row, their tokens),
// inside one write transaction and appends the audit row it returns, by actor; an entry
// without an Action means nothing changed. Returns ErrNotFound for an unknown user.
func (db *DB) changeUser(ctx context.Context, name, actor string, change func(*sql.Tx, storage.User) (storage.AuditEntry, error)) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		var u storage.User
		err := tx.QueryRowContext(ctx, `SELECT id, name, role FROM users WHERE name = ?`, name).Scan(&u.ID, &u.Name, &u.Role)
		if errors.Is(err, sql.ErrNoRows) {
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

// lastAdmin returns ErrLastAdmin if at most one admin is left.
func lastAdmin(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = ?`, storage.RoleAdmin).Scan(&n); err != nil {
		return err
	}
	if n <= 1 {
		return storage.ErrLastAdmin
	}
	return nil
}

// Users returns every user, by name. PasswordHash is left empty.
func (db *DB) Users(ctx context.Context) ([]storage.User, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, role, created_at, must_change_password FROM users ORDER BY name`)
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
	return out, rows.Err()
}
