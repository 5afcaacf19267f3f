package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// Setting returns a stored setting. Returns ErrNotFound if it was never set.
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("setting %q: %w", name, storage.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return v, nil
}

// SettingOrInit returns the stored setting, first storing init() under that name if it
// was never set. Replicas racing here agree on one value: each inserts its own only if
// no row is there (ON CONFLICT DO NOTHING, which waits for a concurrent insert of the
// name to commit or roll back), then every one of them returns what is stored, the
// first insert's value.
func (db *DB) SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error) {
	if v, err := db.Setting(ctx, name); err == nil || !errors.Is(err, storage.ErrNotFound) {
		return v, err
	}
	v, err := init()
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, v)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("setting %q: %w", name, err)
	}
	return db.Setting(ctx, name)
}

// SetSetting stores value under name, in place of what was stored there.
func (db *DB) SetSetting(ctx context.Context, name, value string) error {
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
		return err
	})
	if err != nil {
		return fmt.Errorf("set setting %q: %w", name, err)
	}
	return nil
}
