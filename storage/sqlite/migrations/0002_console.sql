-- The console's indexes and tables. Every index on deliveries is paid for by intake, the
-- hot path, so only the events list's most needed filters get one, partial where that
-- keeps it small; the other filters are checked on rows found through these, a bounded
-- stretch at a time (see storage/events.go).

-- Events of one source, newest first (the most common filter).
CREATE INDEX deliveries_source_id ON deliveries (source, id);
-- Duplicates and rejections, newest first: the few rows worth auditing. Accepted
-- deliveries, the bulk, are left out (listing them needs no index: most rows are).
CREATE INDEX deliveries_outcome_id ON deliveries (outcome, id) WHERE outcome != 'accepted';
-- Same key, different content: rare, so this partial index is tiny.
CREATE INDEX deliveries_mismatch ON deliveries (id) WHERE mismatch;
-- One booking's history: high cardinality, found in a few steps instead of a scan.
CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking != '';

-- Deliveries per source, hour and outcome, for the dashboard: it reads a few hundred
-- rows instead of scanning a week of deliveries, bodies and all. Kept off the intake
-- path: RollupStats folds in the deliveries after rolled_up_to, in the background and
-- when the dashboard is shown. Counts outlive the retention sweep, so the dashboard
-- still tells the history once the deliveries are gone.
CREATE TABLE delivery_stats (
    source       TEXT    NOT NULL,
    hour         INTEGER NOT NULL,            -- received_at / 3600000
    outcome      TEXT    NOT NULL,
    deliveries   INTEGER NOT NULL DEFAULT 0,
    mismatches   INTEGER NOT NULL DEFAULT 0,
    with_amount  INTEGER NOT NULL DEFAULT 0,  -- deliveries that carried an amount
    amount       REAL    NOT NULL DEFAULT 0,  -- their amounts summed
    PRIMARY KEY (source, hour, outcome)
) WITHOUT ROWID;

-- The last delivery id folded into delivery_stats (one row).
CREATE TABLE delivery_stats_mark (
    only         INTEGER PRIMARY KEY CHECK (only = 1),
    rolled_up_to INTEGER NOT NULL
);
INSERT INTO delivery_stats_mark (only, rolled_up_to) VALUES (1, 0);

-- Failed sign-ins, per user name and per address ("user:NAME", "addr:IP"), for throttling.
CREATE TABLE login_failures (
    scope    TEXT    PRIMARY KEY,
    failures INTEGER NOT NULL,
    first_at INTEGER NOT NULL,  -- start of the counting window (unix ms)
    last_at  INTEGER NOT NULL
) WITHOUT ROWID;
