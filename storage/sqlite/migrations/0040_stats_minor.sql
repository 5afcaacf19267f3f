-- The dashboard's hourly totals keep money as the ledger does: exactly, in minor units
-- of the currency, by the ledger's rule of what is unsummed (an amount that is no whole
-- number of minor units, JPY 100.5 among them). Their float sums rounded such amounts
-- in and lost cents past 2^53 minor units, so the dashboard and the ledger disagreed.
-- The new column has a new name, so that a replica of an earlier version that still
-- runs fails on it rather than adding major units to minor ones. This migration's step
-- (countStatsMinor) fills it and drops the float column.
ALTER TABLE delivery_stats ADD COLUMN amount_minor INTEGER NOT NULL DEFAULT 0;
