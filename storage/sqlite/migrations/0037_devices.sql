-- The browsers each user signed in from, by the id of the sign-in throttle's device
-- cookie: a cookie is believed only for an id kept here, since the cookie keys are kept
-- in the settings and whoever reads the file could make a cookie of any id. Only the
-- id's SHA-256 is kept, so that the file makes no cookie of a user's own browser.
CREATE TABLE devices (
    id_hash TEXT    PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    seen_at INTEGER NOT NULL  -- last sign-in from the browser (unix ms): kept for the cookie's life
) WITHOUT ROWID;
CREATE INDEX devices_user ON devices (user_id);
-- Forgetting the devices not signed in from for the cookie's life, without reading the others.
CREATE INDEX devices_seen ON devices (seen_at);
