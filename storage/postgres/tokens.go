package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// tokenPrefix marks hookdedup API tokens, so that a leaked one is recognisable.
const tokenPrefix = "hdk_"

// hashToken is what the tokens table keeps of a token: its SHA-256, as the SQLite
// engine keeps it.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a bearer token for the named user and returns it with its metadata,
// and writes the audit row, by actor, in the same transaction. The token is returned
// once: only its SHA-256 is kept. Returns ErrNotFound for an unknown user.
//
// A name that PostgreSQL's text cannot hold (a NUL byte, bytes that are not UTF-8) is
// kept with U+FFFD in their place: it is a label, and the token is still made.
func (db *DB) CreateToken(ctx context.Context, userName, name, actor string) (string, storage.Token, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", storage.Token{}, err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	name = storage.ReplacedText(name)
	t := storage.Token{UserName: userName, Name: name, CreatedAt: db.Now().UTC().Truncate(time.Millisecond)}
	err := db.changeUser(ctx, userName, actor, func(tx pgx.Tx, u storage.User) (storage.AuditEntry, error) {
		t.UserID, t.Role = u.ID, u.Role
		err := tx.QueryRow(ctx, `INSERT INTO tokens (user_id, name, hash, created_at) VALUES ($1, $2, $3, $4) RETURNING id`,
			u.ID, name, hashToken(token), millis(t.CreatedAt)).Scan(&t.ID)
		if err != nil {
			return storage.AuditEntry{}, err
		}
		return storage.AuditEntry{At: t.CreatedAt, Action: "create token", Reason: fmt.Sprintf("%q (id %d) for %s", name, t.ID, userName)}, nil
	})
	if err != nil {
		return "", storage.Token{}, fmt.Errorf("create token for %q: %w", userName, err)
	}
	return token, t, nil
}

// TokenUser returns the user a valid (unrevoked) token belongs to. Returns ErrNotFound
// for an unknown or revoked token.
func (db *DB) TokenUser(ctx context.Context, token string) (storage.User, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return storage.User{}, fmt.Errorf("token: %w", storage.ErrNotFound)
	}
	var u storage.User
	var created int64
	err := db.pool.QueryRow(ctx, `SELECT u.id, u.name, u.role, u.password_hash, u.created_at
		FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1 AND t.revoked_at IS NULL`, hashToken(token)).
		Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.User{}, fmt.Errorf("token: %w", storage.ErrNotFound)
	}
	if err != nil {
		return storage.User{}, fmt.Errorf("token: %w", err)
	}
	u.CreatedAt = fromMillis(created)
	return u, nil
}

// RevokeToken revokes a valid token by id, a token of owner only unless owner is "",
// and writes the audit row, by actor, in the same transaction. Returns ErrNotFound if
// there is no such valid token (of owner).
//
// The revocation is one UPDATE that finds the token still valid: of two replicas
// revoking it at once, the second waits for the first's commit, finds it revoked, and
// returns ErrNotFound, so it is revoked and audited once.
func (db *DB) RevokeToken(ctx context.Context, id int64, owner, actor string) error {
	if !textOK(owner) {
		return fmt.Errorf("revoke token %d: %w", id, storage.ErrNotFound)
	}
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		var name, user string
		err := tx.QueryRow(ctx, `UPDATE tokens t SET revoked_at = $1 FROM users u
			WHERE u.id = t.user_id AND t.id = $2 AND t.revoked_at IS NULL AND ($3 = '' OR u.name = $3)
			RETURNING t.name, u.name`, millis(db.Now()), id, owner).Scan(&name, &user)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.ErrNotFound
		}
		if err != nil {
			return err
		}
		return db.insertAudit(ctx, tx, storage.AuditEntry{Actor: actor, Action: "revoke token",
			Reason: fmt.Sprintf("%q (id %d) of %s", name, id, user)})
	})
	if err != nil {
		return fmt.Errorf("revoke token %d: %w", id, err)
	}
	return nil
}

// Tokens lists the tokens of owner, or every token if owner is "", newest first.
func (db *DB) Tokens(ctx context.Context, owner string) ([]storage.Token, error) {
	if !textOK(owner) {
		return nil, nil // no user has such a name
	}
	rows, err := db.pool.Query(ctx, `SELECT t.id, t.user_id, u.name, u.role, t.name, t.created_at, t.revoked_at
		FROM tokens t JOIN users u ON u.id = t.user_id WHERE $1 = '' OR u.name = $1 ORDER BY t.id DESC`, owner)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	defer rows.Close()
	var out []storage.Token
	for rows.Next() {
		var t storage.Token
		var created int64
		var revoked *int64
		if err := rows.Scan(&t.ID, &t.UserID, &t.UserName, &t.Role, &t.Name, &created, &revoked); err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
		t.CreatedAt = fromMillis(created)
		if revoked != nil {
			t.RevokedAt = fromMillis(*revoked)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return out, nil
}
