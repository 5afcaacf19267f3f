-- The console's indexes and tables. Every index on deliveries is paid for by intake, the
-- hot path, so only the events list's indexable filters get one; the rest of its filters
-- are checked on rows found through these (see storage/console.go).

-- Events of one source, newest first (the most common filter).
CREATE INDEX deliveries_source_id ON deliveries (source, id);
-- Events by outcome, newest first: the duplicates (and the rejections) are the few rows
-- worth auditing; dashboards list recent duplicates through it too.
CREATE INDEX deliveries_outcome_id ON deliveries (outcome, id);
-- Same key, different content: rare, so a partial index is tiny.
CREATE INDEX deliveries_mismatch ON deliveries (id) WHERE mismatch;
-- One booking's history: high cardinality, found in a few steps instead of a scan.
CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking != '';
-- One property's events, newest first. Rejections carry no business fields: left out.
CREATE INDEX deliveries_property ON deliveries (property, id) WHERE property != '';

-- Deliveries per source, hour and outcome, kept by a trigger so that the dashboard reads
-- a few hundred rows instead of scanning a week of deliveries (bodies and all). It costs
-- intake one upsert into a small, hot table. Counts outlive the retention sweep: the
-- dashboard tells the history even after the deliveries are gone.
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

INSERT INTO delivery_stats (source, hour, outcome, deliveries, mismatches, with_amount, amount)
SELECT source, received_at / 3600000, outcome, count(*), sum(mismatch != 0),
       sum(amount != ''), total(CASE WHEN amount != '' THEN CAST(amount AS REAL) END)
FROM deliveries GROUP BY 1, 2, 3;

CREATE TRIGGER deliveries_stats AFTER INSERT ON deliveries BEGIN
    INSERT INTO delivery_stats (source, hour, outcome, deliveries, mismatches, with_amount, amount)
    VALUES (NEW.source, NEW.received_at / 3600000, NEW.outcome, 1, NEW.mismatch != 0, NEW.amount != '',
            CASE WHEN NEW.amount != '' THEN CAST(NEW.amount AS REAL) ELSE 0 END)
    ON CONFLICT (source, hour, outcome) DO UPDATE SET
        deliveries  = deliveries + 1,
        mismatches  = mismatches + excluded.mismatches,
        with_amount = with_amount + excluded.with_amount,
        amount      = amount + excluded.amount;
END;

-- Failed sign-ins, per user name and per address ("user:NAME", "addr:IP"), for throttling.
CREATE TABLE login_failures (
    scope    TEXT    PRIMARY KEY,
    failures INTEGER NOT NULL,
    first_at INTEGER NOT NULL,  -- start of the counting window (unix ms)
    last_at  INTEGER NOT NULL
) WITHOUT ROWID;
