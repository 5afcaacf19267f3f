// Package alert tells people when something needs them: rules ([[alert]] in the
// config) evaluated every few seconds against storage and the running server, alerts
// kept in storage with a state (open → acknowledged → resolved), and notifications of
// their transitions sent to channels ([[alert_channel]]: a signed webhook, a Slack or
// Mattermost incoming webhook, email over SMTP).
//
// Notifications are written to an outbox in the transaction of the transition they
// tell of, and sent from there with retries and backoff, so that they survive a
// restart and a channel that is down for a while. They are sent on transitions only
// (opened, resolved): a condition that holds for hours sends one notification, and
// one more when it clears.
package alert
