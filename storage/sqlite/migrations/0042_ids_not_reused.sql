-- Token and user ids are never given again. Without AUTOINCREMENT SQLite gives a new row
-- the highest id plus one, which is a removed row's when that one was the highest: the
-- audit log names tokens by id ("(id 5)"), and `hookdedup token revoke 5` typed from an
-- old note would revoke someone else's token. PostgreSQL's identities never go back.
--
-- A table's AUTOINCREMENT is set only by creating it, so users is made anew, and with it
-- the tables that refer to it: dropped while they still referred to it, users would
-- take their rows along (ON DELETE CASCADE), and foreign keys cannot be turned off inside
-- the migration's transaction. Renaming users_new to users makes their references name
-- users again. Every row keeps its id; the step after this SQL (seedIDs) moves the
-- counters past the ids the audit log shows were given.
--
-- A token, session or device of a user no longer there (removed by a connection without
-- foreign keys, such as the sqlite3 shell's by default) is not copied: the new tables check
-- their references as rows go in, and one such row would fail the migration, so that
-- hookdedup would no longer start on a database it ran on. Such a row gives no access
-- (each is read through its user), and the user's removal would have taken it along.

CREATE TABLE users_new (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    name                 TEXT    NOT NULL UNIQUE,
    role                 TEXT    NOT NULL,
    password_hash        TEXT    NOT NULL,
    created_at           INTEGER NOT NULL,
    must_change_password INTEGER NOT NULL DEFAULT 0
);
INSERT INTO users_new (id, name, role, password_hash, created_at, must_change_password)
SELECT id, name, role, password_hash, created_at, must_change_password FROM users;

-- API bearer tokens, stored as SHA-256 hashes; the token itself is shown once.
CREATE TABLE tokens_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users_new (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
INSERT INTO tokens_new (id, user_id, name, hash, created_at, revoked_at)
SELECT id, user_id, name, hash, created_at, revoked_at FROM tokens WHERE user_id IN (SELECT id FROM users_new);
-- Nor is the id of a token left out given again.
INSERT INTO sqlite_sequence (name, seq) SELECT 'tokens_new', 0
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'tokens_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT coalesce(max(id), 0) FROM tokens)) WHERE name = 'tokens_new';

-- Console sessions (0007_sessions.sql).
CREATE TABLE sessions_new (
    id_hash    TEXT    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users_new (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,  -- sign-in (unix ms): bounds the session's whole life
    seen_at    INTEGER NOT NULL   -- last request, to the minute: bounds its idle time
) WITHOUT ROWID;
INSERT INTO sessions_new (id_hash, user_id, created_at, seen_at)
SELECT id_hash, user_id, created_at, seen_at FROM sessions WHERE user_id IN (SELECT id FROM users_new);

-- The browsers each user signed in from (0037_devices.sql).
CREATE TABLE devices_new (
    id_hash TEXT    PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users_new (id) ON DELETE CASCADE,
    seen_at INTEGER NOT NULL  -- last sign-in from the browser (unix ms): kept for the cookie's life
) WITHOUT ROWID;
INSERT INTO devices_new (id_hash, user_id, seen_at)
SELECT id_hash, user_id, seen_at FROM devices WHERE user_id IN (SELECT id FROM users_new);

-- The referring tables first: users then has no row anything refers to.
DROP TABLE devices;
DROP TABLE sessions;
DROP TABLE tokens;
DROP TABLE users;
ALTER TABLE users_new RENAME TO users;
ALTER TABLE tokens_new RENAME TO tokens;
ALTER TABLE sessions_new RENAME TO sessions;
ALTER TABLE devices_new RENAME TO devices;

CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_seen ON sessions (seen_at);
CREATE INDEX devices_user ON devices (user_id);
CREATE INDEX devices_seen ON devices (seen_at);
