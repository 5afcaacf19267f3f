package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Roles, each allowed what the one before it is and more.
const (
	RoleViewer   = "viewer"   // browse
	RoleOperator = "operator" // + release, reprocess
	RoleAdmin    = "admin"    // + users, sources
)

// ValidRole reports whether role is one of the roles.
func ValidRole(role string) bool {
	return role == RoleViewer || role == RoleOperator || role == RoleAdmin
}

// ErrExists means a row with the same unique name already exists.
var ErrExists = errors.New("already exists")

// User is a console user. PasswordHash is a bcrypt hash.
type User struct {
	ID           int64
	Name         string
	Role         string
	PasswordHash string
	CreatedAt    time.Time
}

// CreateUser adds a user. Returns ErrExists if the name is taken.
func (db *DB) CreateUser(ctx context.Context, u User) (User, error) {
	if !ValidRole(u.Role) {
		return User{}, fmt.Errorf("create user %q: unknown role %q", u.Name, u.Role)
	}
	u.CreatedAt = db.Now().UTC().Truncate(time.Millisecond)
	res, err := db.write.ExecContext(ctx,
		`INSERT INTO users (name, role, password_hash, created_at) VALUES (?, ?, ?, ?)`,
		u.Name, u.Role, u.PasswordHash, millis(u.CreatedAt))
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return User{}, fmt.Errorf("create user %q: %w", u.Name, ErrExists)
		}
		return User{}, fmt.Errorf("create user %q: %w", u.Name, err)
	}
	u.ID, err = res.LastInsertId()
	return u, err
}

// UserByName returns the user with the given name. Returns ErrNotFound if there is none.
func (db *DB) UserByName(ctx context.Context, name string) (User, error) {
	var u User
	var created int64
	err := db.read.QueryRowContext(ctx,
		`SELECT id, name, role, password_hash, created_at FROM users WHERE name = ?`, name).
		Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %q: %w", name, err)
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
		return "", fmt.Errorf("setting %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return v, nil
}

// SettingOrInit returns the stored setting, first storing init() under that name if it
// was never set. Two processes racing here agree on one value: the first insert wins.
func (db *DB) SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error) {
	if v, err := db.Setting(ctx, name); err == nil || !errors.Is(err, ErrNotFound) {
		return v, err
	}
	v, err := init()
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	if _, err := db.write.ExecContext(ctx,
		`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, v); err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return db.Setting(ctx, name)
}
