package main

import "strings"

// The engine is chosen here, in the wiring, by the form of the database setting: a
// postgres:// or postgresql:// URL names a PostgreSQL database, anything else is the path
// of a SQLite file. Nothing past cmd knows which engine runs: every command holds a
// storage.Store.

// isPostgres reports whether database names a PostgreSQL database rather than a file.
func isPostgres(database string) bool {
	scheme, _, ok := strings.Cut(database, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}
