-- A password someone other than its user chose (the first admin's, generated and printed
-- by serve; one an admin set in the console for another user) is one-time: the console
-- asks its user for their own before anything else, and setting it clears the flag.
ALTER TABLE users ADD COLUMN must_change_password INTEGER NOT NULL DEFAULT 0;

-- A database from before the flag may still have its first admin on the printed password:
-- the user serve added (its audit row) whose password nobody has set since.
UPDATE users SET must_change_password = 1
WHERE EXISTS (SELECT 1 FROM audit_log a WHERE a.actor = 'serve (first start)' AND a.action = 'add user'
                AND a.reason = users.name || ' as admin' AND a.at >= users.created_at)
  AND NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.action = 'set password'
                AND a.reason = users.name AND a.at >= users.created_at);
