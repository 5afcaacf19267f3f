-- The ledger's and the suspects' running totals count apart the deliveries and suspects
-- that carried no amount (storage.Money.NoAmount): they add nothing to a sum, and a
-- total of them alone read as a refund of 0.00 where the money is not known.
ALTER TABLE ledger_days ADD COLUMN no_amount bigint NOT NULL DEFAULT 0;
ALTER TABLE ledger_totals ADD COLUMN no_amount bigint NOT NULL DEFAULT 0;
ALTER TABLE suspect_totals ADD COLUMN no_amount bigint NOT NULL DEFAULT 0;

-- The daily totals already there are counted here from the money mismatches folded into
-- them (a caught duplicate always carried an amount), through the index of money
-- mismatches, rather than emptied and folded again: they outlive the deliveries that
-- retention sweeps, which no roll-up could count again. A money mismatch swept before
-- this version stays in its day's count, as one without an amount was before.
UPDATE ledger_days AS t SET no_amount = n.deliveries
FROM (SELECT received_at / 86400000 AS day, source, property, currency, count(*) AS deliveries
    FROM deliveries
    WHERE money_mismatch AND outcome = 'duplicate' AND amount = ''
        AND id <= coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0)
    GROUP BY 1, 2, 3, 4) AS n
WHERE t.kind = 'money_mismatch' AND t.day = n.day AND t.source = n.source AND t.property = n.property
    AND t.currency = n.currency;
UPDATE ledger_totals AS t SET no_amount = n.no_amount
FROM (SELECT day, source, currency, kind, sum(no_amount) AS no_amount FROM ledger_days
    WHERE no_amount > 0 GROUP BY 1, 2, 3, 4) AS n
WHERE t.day = n.day AND t.source = n.source AND t.currency = n.currency AND t.kind = n.kind;

-- Suspects are never deleted, so their totals are folded again from the first, as
-- after a build with another currency table: the readers count every suspect from the
-- table until the roll-up has caught up, exactly, only slower. Every older replica is
-- stopped before a newer one migrates, so no roll-up holds the mark meanwhile.
DELETE FROM suspect_totals;
UPDATE suspect_totals_mark SET rolled_up_to = 0 WHERE id = 1;
