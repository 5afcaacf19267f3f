-- The ledger's and the suspects' running totals count apart the deliveries and suspects
-- that carried no amount (storage.Money.NoAmount): they add nothing to a sum, and a
-- total of them alone read as a refund of 0.00 where the money is not known.
ALTER TABLE ledger_days ADD COLUMN no_amount INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger_totals ADD COLUMN no_amount INTEGER NOT NULL DEFAULT 0;
ALTER TABLE suspect_totals ADD COLUMN no_amount INTEGER NOT NULL DEFAULT 0;

-- The daily totals already there are counted here from the money mismatches folded into
-- them (a caught duplicate always carried an amount), through the index of money
-- mismatches, rather than emptied and folded again: they outlive the deliveries that
-- retention sweeps, which no roll-up could count again. A money mismatch swept before
-- this version stays in its day's count, as one without an amount was before.
UPDATE ledger_days SET no_amount = n.deliveries
FROM (SELECT received_at / 86400000 AS day, source, property, currency, count(*) AS deliveries
    FROM deliveries
    WHERE money_mismatch = 1 AND outcome = 'duplicate' AND amount = ''
        AND id <= (SELECT rolled_up_to FROM ledger_mark)
    GROUP BY 1, 2, 3, 4) AS n
WHERE ledger_days.kind = 'money_mismatch' AND ledger_days.day = n.day AND ledger_days.source = n.source
    AND ledger_days.property = n.property AND ledger_days.currency = n.currency;
UPDATE ledger_totals SET no_amount = n.no_amount
FROM (SELECT day, source, currency, kind, sum(no_amount) AS no_amount FROM ledger_days
    WHERE no_amount > 0 GROUP BY 1, 2, 3, 4) AS n
WHERE ledger_totals.day = n.day AND ledger_totals.source = n.source AND ledger_totals.currency = n.currency
    AND ledger_totals.kind = n.kind;

-- Suspects are never deleted, so their totals are folded again from the first, as
-- after a build with another currency table: the readers count every suspect from the
-- table until the roll-up has caught up, exactly, only slower. tail_reviews moves so
-- that a roll-up that read a stretch before this writes nothing of it.
DELETE FROM suspect_totals;
UPDATE suspect_totals_mark SET rolled_up_to = 0, tail_reviews = tail_reviews + 1;
