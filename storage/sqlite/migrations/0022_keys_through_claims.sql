-- An accepted delivery is found by its key through its claim, while the claim names it
-- (by_claim = 1), and is left out of the index of keys until then. The claim's own
-- unique index already holds that key: a new key wrote a leaf of two indexes ordered by
-- the provider's random ids, one of them only to find the delivery the claim names.
-- With millions of keys stored those leaves are rarely the ones a recent key touched,
-- and each is a page of the write-ahead log, copied again by the checkpoint.
--
-- The claim lets go of its first delivery when it is taken over by a new one (an
-- expired or released key claimed again) or deleted (the expiry sweep, a delivery
-- blocked by its business key): the delivery then joins the index of keys, in the
-- same statement, by these triggers, whichever code changed the claim. The writer
-- sets by_claim only on a delivery that its claim names as the transaction commits;
-- every other row (and every row stored before this schema) keeps 0, in the index.
ALTER TABLE deliveries ADD COLUMN by_claim INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER claims_first_replaced AFTER UPDATE OF first_delivery ON claims
WHEN NEW.first_delivery IS NOT OLD.first_delivery
BEGIN
    UPDATE deliveries SET by_claim = 0 WHERE id = OLD.first_delivery AND by_claim != 0;
END;

CREATE TRIGGER claims_first_deleted AFTER DELETE ON claims
BEGIN
    UPDATE deliveries SET by_claim = 0 WHERE id = OLD.first_delivery AND by_claim != 0;
END;

DROP INDEX deliveries_key;
CREATE INDEX deliveries_key ON deliveries (source, key) WHERE body_from = 0 AND by_claim = 0;
