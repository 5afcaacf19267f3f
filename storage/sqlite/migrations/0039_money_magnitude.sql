-- Money caught and at risk counts each amount by its magnitude (storage.MoneyMinor): a
-- source that sends refunds as "-182.50" and another that sends them as "182.50", or a
-- refund of -50 and a charge of 50, no longer sum to 0.00 at risk. The ledger's daily
-- totals and the dashboard's hourly ones are mended in place by this migration's step
-- (countMagnitudes). Suspects are never deleted, so their running totals, summed with
-- signs, are emptied and folded again from the first, as by 0038: the readers count
-- every suspect from the table, exactly, until the roll-up has caught up.
DELETE FROM suspect_totals;
UPDATE suspect_totals_mark SET rolled_up_to = 0, tail_reviews = tail_reviews + 1;
