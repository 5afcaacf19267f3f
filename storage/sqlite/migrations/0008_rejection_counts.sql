-- Rejections counted without a delivery row. Whoever reaches the port can send
-- unauthenticated requests (an unknown source, a bad signature, a body over the limit) as
-- fast as the network allows; intake stores a bounded sample of them as deliveries and
-- only counts the rest here, so that such a flood costs a few rows a minute, not one row
-- per request. One row per minute, name and status: the events list sums them for the
-- rejections its filter would have shown, and the dashboard's hourly totals
-- (delivery_stats) take the same counts when they are written.
CREATE TABLE rejection_counts (
    minute     INTEGER NOT NULL,  -- unix minutes (received_at / 60000)
    source     TEXT    NOT NULL,  -- the source, or the unknown name asked for ('' past a bound)
    status     INTEGER NOT NULL,  -- the HTTP status answered
    rejections INTEGER NOT NULL,
    PRIMARY KEY (minute, source, status)
) WITHOUT ROWID;
