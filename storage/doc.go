// Package storage is hookdedup's domain: claims, deliveries, dispatch attempts, users,
// API tokens, the audit log, suspects and settings, as plain types, with the errors and
// the rules (roles, money, approval thresholds) that do not depend on where they are
// kept. It runs no SQL.
//
// Each engine lives in a package of its own beneath it (storage/sqlite, the default),
// owns its schema and migrations, and is the only code that speaks its SQL dialect. The
// receiver, the console and the CLI depend on this package's types and on small
// interfaces of their own; only the wiring in cmd picks an engine.
package storage
