package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) Alerts(ctx context.Context, f storage.AlertFilter) (_ []storage.Alert, err error) {
	err = errNotBuilt
	return
}

func (db *DB) GetAlert(ctx context.Context, id int64) (_ storage.Alert, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ActiveAlerts(ctx context.Context) (_ []storage.Alert, err error) {
	err = errNotBuilt
	return
}

func (db *DB) OpenAlert(ctx context.Context, a storage.Alert, at time.Time) (_ storage.Alert, _ bool, err error) {
	err = errNotBuilt
	return
}

func (db *DB) UpdateAlertValue(ctx context.Context, id int64, summary, value string, at time.Time) error {
	return errNotBuilt
}

func (db *DB) AcknowledgeAlert(ctx context.Context, id int64, actor string, at time.Time) (_ storage.Alert, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (_ storage.Alert, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) LeaseNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int) (_ []storage.Notification, err error) {
	err = errNotBuilt
	return
}

func (db *DB) FinishNotification(ctx context.Context, id int64, res storage.NotificationResult, at time.Time) error {
	return errNotBuilt
}

func (db *DB) NotificationCounts(ctx context.Context) (_ map[string]map[string]int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) MoneyMismatches(ctx context.Context, since time.Time) (_ map[string]int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) OpenSuspects(ctx context.Context) (_ map[string]int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SignatureFailures(ctx context.Context, since time.Time, status int) (_ map[string]int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) FailingStreaks(ctx context.Context, sources []string, limit int) (_ map[string]int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) AddRejectionCounts(ctx context.Context, counts []storage.RejectionCount) error {
	return errNotBuilt
}

func (db *DB) RejectionsNotStored(ctx context.Context, f storage.DeliveryFilter) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}
