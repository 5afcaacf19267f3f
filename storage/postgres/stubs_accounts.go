package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) AuditLog(ctx context.Context, before int64, limit int) (_ []storage.AuditEntry, err error) {
	err = errNotBuilt
	return
}

func (db *DB) AuditRows(ctx context.Context, fn func(storage.AuditEntry) error) error {
	return errNotBuilt
}

func (db *DB) AppendAudit(ctx context.Context, e storage.AuditEntry) error {
	return errNotBuilt
}

func (db *DB) VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (_ storage.AuditCheck, err error) {
	err = errNotBuilt
	return
}

func (db *DB) AuditChain(ctx context.Context) (_ storage.AuditCheck, err error) {
	err = errNotBuilt
	return
}

func (db *DB) CreateSession(ctx context.Context, u storage.User, now time.Time) (_ string, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SessionByID(ctx context.Context, id string) (_ storage.Session, err error) {
	err = errNotBuilt
	return
}

func (db *DB) TouchSession(ctx context.Context, id string, at time.Time) error {
	return errNotBuilt
}

func (db *DB) EndSession(ctx context.Context, id string) error {
	return errNotBuilt
}

func (db *DB) EndIdleSessions(ctx context.Context, seenBefore time.Time) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) EndUserSessions(ctx context.Context, name, actor string) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) LoginAttempt(ctx context.Context, now time.Time, scopes map[string]storage.Throttle) (_ time.Time, err error) {
	err = errNotBuilt
	return
}

func (db *DB) LoginSucceeded(ctx context.Context, clear string, keep ...string) error {
	return errNotBuilt
}

func (db *DB) CreateToken(ctx context.Context, userName, name, actor string) (_ string, _ storage.Token, err error) {
	err = errNotBuilt
	return
}

func (db *DB) TokenUser(ctx context.Context, token string) (_ storage.User, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RevokeToken(ctx context.Context, id int64, owner, actor string) error {
	return errNotBuilt
}

func (db *DB) Tokens(ctx context.Context, owner string) (_ []storage.Token, err error) {
	err = errNotBuilt
	return
}

func (db *DB) CreateUser(ctx context.Context, u storage.User, actor string) (_ storage.User, err error) {
	err = errNotBuilt
	return
}

func (db *DB) UserByName(ctx context.Context, name string) (_ storage.User, err error) {
	err = errNotBuilt
	return
}

func (db *DB) CountUsers(ctx context.Context) (_ int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Setting(ctx context.Context, name string) (_ string, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SettingOrInit(ctx context.Context, name string, init func() (string, error)) (_ string, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SetUserRole(ctx context.Context, name, role, actor string) (_ string, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SetUserPassword(ctx context.Context, name, hash, actor string) error {
	return errNotBuilt
}

func (db *DB) SetOneTimePassword(ctx context.Context, name, hash, actor string) error {
	return errNotBuilt
}

func (db *DB) DeleteUser(ctx context.Context, name, actor string) error {
	return errNotBuilt
}

func (db *DB) Users(ctx context.Context) (_ []storage.User, err error) {
	err = errNotBuilt
	return
}
