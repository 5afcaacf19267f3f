package postgres

import (
	"context"

	"github.com/hookdedup/hookdedup/storage"
)

// ExplainBulkPreview returns PostgreSQL's plan of the query that finds the keys of
// req's preview, as EXPLAIN writes it; with analyze, the query runs and the plan says
// what each step read.
func (db *DB) ExplainBulkPreview(ctx context.Context, req storage.BulkRequest, analyze bool) (string, error) {
	query, args := bulkQuery(req)
	return db.explain(ctx, analyze, query, args...)
}
