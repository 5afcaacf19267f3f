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

-- The last suspect id folded into suspect_totals (one row); how many reviews have
-- changed a suspect after it: a roll-up reads its stretch on a read connection, and a
-- review that commits before the roll-up writes would leave the suspect folded in the
-- state it had, so the roll-up moves the mark only if neither changed since it read;
-- and the currency table (storage.CurrencyTable) the totals' minor units were read
-- by: a build with another one ignores the totals and recounts them.
CREATE TABLE IF NOT EXISTS suspect_totals_mark (
    only           INTEGER PRIMARY KEY CHECK (only = 1),
    rolled_up_to   INTEGER NOT NULL,
    tail_reviews   INTEGER NOT NULL DEFAULT 0,
    currency_table TEXT    NOT NULL DEFAULT ''
);
INSERT OR IGNORE INTO suspect_totals_mark (only, rolled_up_to) VALUES (1, 0);

-- How many times ReviewSuspect changed the suspect: a review moves the suspect in the
-- totals, and counts itself here in the same UPDATE as the state.
ALTER TABLE suspects ADD COLUMN reviews INTEGER NOT NULL DEFAULT 0;

-- A state changed by anything else (an older release, which opened this schema
-- before versions refused a newer one and reviews with a bare UPDATE; an operator's
-- SQL) would leave a folded suspect counted in its old state. Then, for a suspect at
-- or below the mark, the totals are emptied and the mark put back to 0, so that the
-- readers count every suspect from the table, exactly, and the roll-up folds them all
-- again; tail_reviews moves in any case, so that a roll-up that read the suspect before
-- this does not write what it read. Nothing is written as suspects are folded.
CREATE TRIGGER IF NOT EXISTS suspect_totals_recount AFTER UPDATE OF state ON suspects
WHEN NEW.state IS NOT OLD.state AND NEW.reviews IS OLD.reviews
BEGIN
    DELETE FROM suspect_totals WHERE NEW.id <= (SELECT rolled_up_to FROM suspect_totals_mark);
    UPDATE suspect_totals_mark SET tail_reviews = tail_reviews + 1,
        rolled_up_to = CASE WHEN NEW.id <= rolled_up_to THEN 0 ELSE rolled_up_to END;
END;
