-- How far each roll-up (the dashboard's hourly totals, the ledger's daily totals) may
-- fold deliveries: every delivery with an id up to safe_to is final, committed or never
-- to be. Delivery ids come from a sequence, and the transactions that take them commit
-- in any order: a roll-up that folded every id above its mark could pass an id whose
-- transaction commits later, and that delivery would never be counted. So a roll-up
-- folds only up to safe_to, and moves it by a fence: the sequence's last id (fence_to)
-- and the transactions then holding ids of it (holders, virtual transaction ids as
-- pg_locks names them). Once none of them runs any more, every id up to fence_to is
-- final (stats.go). One row per roll-up, written by the replica that holds the
-- roll-up's advisory lock.
CREATE TABLE rollup_fences (
    rollup   text   PRIMARY KEY,            -- stats | ledger
    safe_to  bigint NOT NULL DEFAULT 0,
    fence_to bigint NOT NULL DEFAULT 0,
    holders  text[] NOT NULL DEFAULT '{}'
);
