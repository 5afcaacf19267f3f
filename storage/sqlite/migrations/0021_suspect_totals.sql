-- The suspects counted per source, kind, state and currency, so that the console's
-- counts (SuspectCounts) and the open suspects' alert (OpenSuspects) read a few rows
-- instead of every suspect. RollupSuspects folds in the suspects after
-- suspect_totals_mark; the readers add the ones after it as they read, so a database
-- from before this table is counted exactly from the start, and rolled up a stretch at
-- a time. A review moves a suspect already folded in from its old state's row to its
-- new one's. Amounts are summed exactly in minor units, in two parts that a review can
-- take an amount out of again exactly (storage.SuspectTotal).
CREATE TABLE IF NOT EXISTS suspect_totals (
    source      TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    currency    TEXT    NOT NULL,
    suspects    INTEGER NOT NULL DEFAULT 0,
    amount_high INTEGER NOT NULL DEFAULT 0,  -- the sum of each amount's minor units / 1e9
    amount_low  INTEGER NOT NULL DEFAULT 0,  -- the sum of the rest (minor units % 1e9)
    unsummed    INTEGER NOT NULL DEFAULT 0,  -- suspects whose amount is no exact number of minor units
    PRIMARY KEY (source, kind, state, currency)
) WITHOUT ROWID;

-- The last suspect id folded into suspect_totals (one row), and how many reviews have
-- changed a suspect after it: a roll-up reads its stretch on a read connection, and a
-- review that commits before the roll-up writes would leave the suspect folded in the
-- state it had. The roll-up moves the mark only if neither changed since it read.
CREATE TABLE IF NOT EXISTS suspect_totals_mark (
    only         INTEGER PRIMARY KEY CHECK (only = 1),
    rolled_up_to INTEGER NOT NULL,
    tail_reviews INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO suspect_totals_mark (only, rolled_up_to) VALUES (1, 0);
