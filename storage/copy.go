package storage

import "context"

// TableSource is a database read table by table, in one snapshot, for a copy into
// another engine (hookdedup migrate --to): the engine that copies knows its tables and
// columns, and asks the source for each by name.
type TableSource interface {
	// ReadTable calls fn with each row of table, oldest first (by its first column),
	// its values in the order of columns. A column the source has no such table or
	// column for is an error that names it.
	ReadTable(ctx context.Context, table string, columns []string, fn func(row []any) error) error
	// CountRows returns how many rows table holds.
	CountRows(ctx context.Context, table string) (int64, error)
	// Unchanged returns an error when the source may have been written since its
	// snapshot began (a serve started during the copy): what it stored would be
	// missing from the copy, which then commits nothing.
	Unchanged(ctx context.Context) error
}

// TableCopy is what a copy did to one table.
type TableCopy struct {
	Table  string
	Source int64 // rows in the source
	Copied int64 // rows written
}
