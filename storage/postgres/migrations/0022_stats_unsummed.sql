-- The hourly totals count the amounts they cannot sum, those that are no plain decimal
-- number ("1.234,56", "n/a"), rather than adding the number their text starts with.
-- Totals rolled up before keep what they summed.
ALTER TABLE delivery_stats ADD COLUMN unsummed bigint NOT NULL DEFAULT 0;
