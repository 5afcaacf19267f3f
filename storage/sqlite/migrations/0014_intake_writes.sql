-- A duplicate whose body is byte for byte its first delivery's (a provider's
-- redelivery, the bulk of duplicates) stores no copy of it: body_from names the
-- delivery whose body it is, and its own body is NULL. Its headers (another signature,
-- another timestamp) are its own as before. Reads take the body from there; the
-- retention sweep gives such duplicates their own copy before it deletes the delivery
-- they refer to. 0: the delivery stores its own body.
ALTER TABLE deliveries ADD COLUMN body_from INTEGER NOT NULL DEFAULT 0;

-- Receipt times grow with ids: the retention sweep and the events list's time filter
-- find their ids by a binary search over the table's own ids (events.go), and intake
-- no longer pays for an index of receipt times, one more B-tree write per delivery.
DROP INDEX deliveries_received_at;
