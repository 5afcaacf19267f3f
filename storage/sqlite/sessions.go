package sqlite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// hashSessionID is what the sessions table keeps of a session id: the id is the
// credential the cookie carries, so the table holds only its digest.
func hashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// CreateSession starts a console session for u at now and returns its id: a random
// secret for the session cookie, of which only the SHA-256 is kept. The session is
// created only while u still has the password hash u.PasswordHash, so a password changed
// since it was checked cannot gain a session. Returns ErrNotFound if u was removed or its
// password changed meanwhile.
func (db *DB) CreateSession(ctx context.Context, u storage.User, now time.Time) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	res, err := db.writeExec(ctx, `INSERT INTO sessions (id_hash, user_id, created_at, seen_at)
		SELECT ?1, id, ?2, ?2 FROM users WHERE id = ?3 AND password_hash = ?4`,
		hashSessionID(id), millis(now), u.ID, u.PasswordHash)
	if err != nil {
		return "", fmt.Errorf("create session for %q: %w", u.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", fmt.Errorf("create session for %q: %w", u.Name, errors.Join(err, storage.ErrNotFound))
	}
	return id, nil
}

// SessionByID returns the session with that id and its user. Returns ErrNotFound for an
// unknown or ended session. One primary-key look-up: it runs on every console request.
func (db *DB) SessionByID(ctx context.Context, id string) (storage.Session, error) {
	var s storage.Session
	var created, seen, userCreated int64
	err := db.read.QueryRowContext(ctx, `SELECT s.created_at, s.seen_at, u.id, u.name, u.role, u.created_at, u.must_change_password
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = ?`, hashSessionID(id)).
		Scan(&created, &seen, &s.User.ID, &s.User.Name, &s.User.Role, &userCreated, &s.User.MustChangePassword)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Session{}, fmt.Errorf("session: %w", storage.ErrNotFound)
	}
	if err != nil {
		return storage.Session{}, fmt.Errorf("session: %w", err)
	}
	s.CreatedAt, s.SeenAt, s.User.CreatedAt = fromMillis(created), fromMillis(seen), fromMillis(userCreated)
	return s, nil
}

// TouchSession records a request of the session with that id at at (its idle time starts
// again). Callers touch a session once a minute at most: it is a write.
func (db *DB) TouchSession(ctx context.Context, id string, at time.Time) error {
	if _, err := db.writeExec(ctx, `UPDATE sessions SET seen_at = ? WHERE id_hash = ?`,
		millis(at), hashSessionID(id)); err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// EndSession ends the session with that id (signing out, or a session found expired).
// Ending a session that is already gone is not an error.
func (db *DB) EndSession(ctx context.Context, id string) error {
	if _, err := db.writeExec(ctx, `DELETE FROM sessions WHERE id_hash = ?`, hashSessionID(id)); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// EndIdleSessions deletes the sessions not seen since seenBefore, and returns how many:
// those whose browser never came back to be told.
func (db *DB) EndIdleSessions(ctx context.Context, seenBefore time.Time) (int64, error) {
	res, err := db.writeExec(ctx, `DELETE FROM sessions WHERE seen_at < ?`, millis(seenBefore))
	if err != nil {
		return 0, fmt.Errorf("end idle sessions: %w", err)
	}
	return res.RowsAffected()
}

// EndUserSessions ends every session of the named user and writes the audit row, by
// actor, in the same transaction. Returns how many sessions ended, and ErrNotFound for
// an unknown user.
func (db *DB) EndUserSessions(ctx context.Context, name, actor string) (int64, error) {
	var n int64
	err := db.changeUser(ctx, name, actor, func(tx *sql.Tx, u storage.User) (storage.AuditEntry, error) {
		var err error
		if n, err = endSessions(ctx, tx, u.ID); err != nil {
			return storage.AuditEntry{}, err
		}
		return storage.AuditEntry{Action: "end sessions", Reason: fmt.Sprintf("%s: %d session%s", name, n, plural(n))}, nil
	})
	if err != nil {
		return 0, fmt.Errorf("end sessions of %q: %w", name, err)
	}
	return n, nil
}

// endSessions deletes every session of the user with that id, inside tx.
func endSessions(ctx context.Context, tx *sql.Tx, userID int64) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// RememberDevice keeps id as the device cookie of a browser the named user signed in
// from at at (its SHA-256 alone, storage.DeviceKey), and forgets the devices not signed
// in from since forgetBefore. A user removed meanwhile keeps nothing.
func (db *DB) RememberDevice(ctx context.Context, name, id string, at, forgetBefore time.Time) error {
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO devices (id_hash, user_id, seen_at)
			SELECT ?1, id, ?2 FROM users WHERE name = ?3
			ON CONFLICT (id_hash) DO UPDATE SET seen_at = excluded.seen_at WHERE devices.user_id = excluded.user_id`,
			storage.DeviceKey(id), millis(at), name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM devices WHERE seen_at < ?`, millis(forgetBefore))
		return err
	})
	if err != nil {
		return fmt.Errorf("remember device of %q: %w", name, err)
	}
	return nil
}

// KnownDevice reports whether id is a device cookie's id that RememberDevice kept for
// the named user, signed in from at since or later.
func (db *DB) KnownDevice(ctx context.Context, name, id string, since time.Time) (bool, error) {
	var known bool
	err := db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM devices d JOIN users u ON u.id = d.user_id
		WHERE d.id_hash = ? AND u.name = ? AND d.seen_at >= ?)`, storage.DeviceKey(id), name, millis(since)).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("device of %q: %w", name, err)
	}
	return known, nil
}
