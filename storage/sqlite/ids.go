package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// seedIDs moves the AUTOINCREMENT counters of tokens and users (0042_ids_not_reused.sql)
// past every id the audit log shows was given, not only past the rows left: a token or
// user removed while it had the highest id took its id out of the table, and an earlier
// version would have given it again. Each insert of those versions took at most one
// more than the number of inserts before it, so as many ids as the log has additions
// bound the ids given; a token's id the log names counts too.
func seedIDs(ctx context.Context, tx *sql.Tx) error {
	var tokens, users int64
	if err := tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM audit_log WHERE action = 'create token'),
		(SELECT count(*) FROM audit_log WHERE action = 'add user')`).Scan(&tokens, &users); err != nil {
		return fmt.Errorf("count the ids given: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT reason FROM audit_log WHERE action IN ('create token', 'revoke token')`)
	if err != nil {
		return fmt.Errorf("read the token ids given: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var reason string
		if err := rows.Scan(&reason); err != nil {
			return fmt.Errorf("read the token ids given: %w", err)
		}
		if id, ok := auditTokenID(reason); ok && id <= maxSeededID {
			tokens = max(tokens, id)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the token ids given: %w", err)
	}
	for table, seq := range map[string]int64{"tokens": tokens, "users": users} {
		res, err := tx.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?`, seq, table)
		if err != nil {
			return fmt.Errorf("move the ids of %s past those given: %w", table, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("move the ids of %s past those given: %w", table, err)
		} else if n == 0 && seq > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, table, seq); err != nil {
				return fmt.Errorf("move the ids of %s past those given: %w", table, err)
			}
		}
	}
	return nil
}

// maxSeededID bounds an id read from the audit log that seedIDs moves a counter past: no
// deployment makes a trillion tokens, and a counter moved near the largest id would leave
// no id for the next token ("database or disk is full" at every one).
const maxSeededID = 1 << 40

// auditTokenID reads the token id from the reason of a "create token" or "revoke
// token" audit row: the token's name quoted as Go quotes it, then " (id N)". The name
// is read as a quoted string first, so that an id written inside it is not taken.
func auditTokenID(reason string) (int64, bool) {
	name, err := strconv.QuotedPrefix(reason)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(reason[len(name):], " (id ")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ")")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return id, true
}
