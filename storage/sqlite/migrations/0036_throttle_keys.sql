-- The sign-in throttle keeps each scope under its SHA-256 (storage.ThrottleKey), not
-- as written: a scope held a session's id, a device cookie's id or a name as typed,
-- which may be a password typed into the wrong field. Rows kept in clear before
-- mean nothing under the new keys and live a day at most: they go, and every count
-- starts again. secure_delete overwrites what they held rather than leaving it in
-- the file's free pages; it is set back for the rest of this connection's life.
PRAGMA secure_delete = ON;
DELETE FROM login_failures;
PRAGMA secure_delete = OFF;
