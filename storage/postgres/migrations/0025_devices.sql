-- The browsers each user signed in from, by the id of the sign-in throttle's device
-- cookie: a cookie is believed only for an id kept here, since the cookie keys are kept
-- in the settings and whoever reads the database could make a cookie of any id. Only
-- the id's SHA-256 is kept, so that the database makes no cookie of a user's own browser.
CREATE TABLE devices (
    id_hash text   PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    seen_at bigint NOT NULL  -- last sign-in from the browser: kept for the cookie's life
);
CREATE INDEX devices_user ON devices (user_id);
-- Forgetting the devices not signed in from for the cookie's life, without reading the others.
CREATE INDEX devices_seen ON devices (seen_at);
