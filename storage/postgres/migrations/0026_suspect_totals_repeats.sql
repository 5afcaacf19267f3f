-- A delivery's money is counted once in a kind and state however many suspects of
-- that kind and state it carries (two correlation rules flagging one refund put one
-- refund at stake), as the ledger counts it: a suspect folded in after an earlier one
-- of its delivery, kind and state adds to suspects and to repeats, not to the amounts.
-- The totals summed before counted every suspect's money: they are emptied and the
-- mark put back to 0, so that the readers count every suspect from the table, exactly,
-- until the roll-up has folded them all again.
ALTER TABLE suspect_totals ADD COLUMN repeats bigint NOT NULL DEFAULT 0;
DELETE FROM suspect_totals;
UPDATE suspect_totals_mark SET rolled_up_to = 0;
