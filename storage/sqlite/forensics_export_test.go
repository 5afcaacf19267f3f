package sqlite

import "context"

// ExplainForensics returns the query plans of the lookups intake makes for a chunk of
// accepted deliveries, and of the key lab's, by name.
func (db *DB) ExplainForensics(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"business keys":    {multiSQL(multiBusinessFind, 2), []any{0, "ota", "h", 0, "k", 1, "ota", "i", 0, "l"}},
		"correlation keys": {multiSQL(multiCorrelationFind, 2), []any{0, "r", "h", 0, "ota", 1, "r", "i", 0, "ota"}},
		"traces":           {multiSQL(multiTraceFind, 2), []any{0, "ota", []byte("h"), 1, "ota", []byte("i")}},
		"prior claims":     {sqlPrior(2), []any{"ota", "a", "ota", "b"}},
		"lab business key": {sqlBusinessMatch, []any{"ota", "h", 0, "k"}},
		"lab correlation":  {sqlCorrelationMatch, []any{"r", "h", 0, "ota"}},
		"lab trace":        {sqlTraceFind, []any{"ota", []byte("h")}},
	} {
		plan, err := db.explain(ctx, q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		out[name] = plan
	}
	return out, nil
}
