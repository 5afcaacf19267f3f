-- The ledger and the money mismatches, counted off the intake path.

-- The dashboard counts money mismatches apart from other mismatches, per hour as the
-- rest. Rows from before count none: detection of them starts with this schema.
ALTER TABLE delivery_stats ADD COLUMN money_mismatches INTEGER NOT NULL DEFAULT 0;

-- The money duplicates moved or put at risk, per day (UTC), source, property and
-- currency: the ledger reads a few thousand of these rows instead of scanning millions
-- of deliveries. Amounts are summed exactly, in minor units of the currency (cents;
-- yen), never across currencies. RollupLedger folds in the duplicates after
-- ledger_mark, reading them through the index of duplicates and rejections, so a
-- database from before this table is counted from its first duplicate on.
CREATE TABLE IF NOT EXISTS ledger_days (
    day        INTEGER NOT NULL,            -- received_at / 86400000
    source     TEXT    NOT NULL,
    property   TEXT    NOT NULL,
    currency   TEXT    NOT NULL,            -- '' for an amount whose source reads no currency
    kind       TEXT    NOT NULL,            -- caught | money_mismatch
    deliveries INTEGER NOT NULL DEFAULT 0,
    amount     INTEGER NOT NULL DEFAULT 0,  -- the exact amounts summed, in minor units
    unsummed   INTEGER NOT NULL DEFAULT 0,  -- deliveries whose amount is no exact number of minor units
    PRIMARY KEY (day, source, property, currency, kind)
) WITHOUT ROWID;

-- ledger_days summed over properties, for the ledger's totals: a few hundred rows for
-- a month, where ledger_days holds one per property and currency each day.
CREATE TABLE IF NOT EXISTS ledger_totals (
    day        INTEGER NOT NULL,
    source     TEXT    NOT NULL,
    currency   TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 0,
    amount     INTEGER NOT NULL DEFAULT 0,
    unsummed   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, source, currency, kind)
) WITHOUT ROWID;

-- The last duplicate's delivery id folded into ledger_days (one row). Both tables are written together.
CREATE TABLE IF NOT EXISTS ledger_mark (
    only         INTEGER PRIMARY KEY CHECK (only = 1),
    rolled_up_to INTEGER NOT NULL
);
INSERT OR IGNORE INTO ledger_mark (only, rolled_up_to) VALUES (1, 0);

-- The suspects of one source, newest first (the suspects page's filter), and a
-- delivery's flags as the other delivery of a suspect are found by suspects_other.
CREATE INDEX IF NOT EXISTS suspects_source ON suspects (source, id);
