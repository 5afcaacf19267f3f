-- A delivery's attempts go with it when retention sweeps it (sweep.go): the downstream's
-- answers they quote are kept no longer than the deliveries, and the table no longer
-- grows with every hand-off ever made. The index finds them by the swept range of ids;
-- the attempts of deliveries swept before this version are deleted here, once.
CREATE INDEX attempts_delivery ON attempts (delivery);
DELETE FROM attempts WHERE NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = attempts.delivery);
