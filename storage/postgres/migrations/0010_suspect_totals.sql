-- The suspects counted per source, kind, state and currency, so that the console's
-- counts (SuspectCounts) and the open suspects' alert (OpenSuspects) read a few rows
-- instead of every suspect. RollupSuspects folds in the suspects after
-- suspect_totals_mark, up to its fence in rollup_fences (row 'suspects': suspect ids
-- come from a sequence and commit in any order, as delivery ids do); the readers add
-- the ones after the mark as they read. A review moves a suspect already folded in
-- from its old state's row to its new one's. Amounts are summed exactly in minor
-- units, in two parts that a review can take an amount out of again exactly
-- (storage.SuspectTotal).
CREATE TABLE suspect_totals (
    source      text   NOT NULL,
    kind        text   NOT NULL,
    state       text   NOT NULL,
    currency    text   NOT NULL,
    suspects    bigint NOT NULL DEFAULT 0,
    amount_high bigint NOT NULL DEFAULT 0,  -- the sum of each amount's minor units / 1e9
    amount_low  bigint NOT NULL DEFAULT 0,  -- the sum of the rest (minor units % 1e9)
    unsummed    bigint NOT NULL DEFAULT 0,  -- suspects whose amount is no exact number of minor units
    PRIMARY KEY (source, kind, state, currency)
);

-- The last suspect id folded into suspect_totals, and the currency table
-- (storage.CurrencyTable) the totals' minor units were read by: a build with another
-- one ignores the totals and recounts them. Its one row is there from the start: every
-- writer of suspect_totals (the roll-up, a review) locks it first, so that a review
-- and a roll-up on two replicas take turns (review.go).
CREATE TABLE suspect_totals_mark (
    id             smallint PRIMARY KEY CHECK (id = 1),
    rolled_up_to   bigint   NOT NULL,
    currency_table text     NOT NULL DEFAULT ''
);
INSERT INTO suspect_totals_mark (id, rolled_up_to) VALUES (1, 0);
