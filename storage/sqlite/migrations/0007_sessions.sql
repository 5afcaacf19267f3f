-- Console sessions, held by the server so that signing out, a new password, a new role,
-- a removed user or an admin can end them at once. The cookie holds a random id; only its
-- SHA-256 is kept, so a copy of the database holds no usable session. Every console
-- request finds its row by primary key.
CREATE TABLE sessions (
    id_hash    TEXT    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,  -- sign-in (unix ms): bounds the session's whole life
    seen_at    INTEGER NOT NULL   -- last request, to the minute: bounds its idle time
) WITHOUT ROWID;
-- Ending one user's sessions (sign out everywhere, new password or role, removal).
CREATE INDEX sessions_user ON sessions (user_id);
-- Deleting sessions left idle, without reading the others.
CREATE INDEX sessions_seen ON sessions (seen_at);

-- The sign-in throttle now counts per (name, address) and per address, with growing
-- waits; counts kept under the old per-name scopes mean nothing to it.
DELETE FROM login_failures;
-- Forgetting old failures without reading every row.
CREATE INDEX login_failures_last_at ON login_failures (last_at);
