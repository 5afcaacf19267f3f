-- A duplicate that stores its body as a reference (body_from, see 0014) has the source,
-- key and booking of the delivery it refers to, which stores its own body (the writer
-- refers only to such a delivery, and only when all three are the same): the indexes of
-- keys and bookings leave it out, and it is found from that delivery through an index of
-- body_from instead. A redelivery then writes no leaf of an index ordered by a random
-- provider id: the one of body_from it writes lies at the right edge, as redeliveries
-- come soon after their first delivery. A delivery that gets its own copy of its body
-- (the retention sweep, a business key block) joins the indexes of keys and bookings as
-- its row is updated.
--
-- Before, the writer referred to a first delivery whose body was the same whatever the
-- booking each took from it (a source's booking_field changed between them): such a
-- duplicate gets its own copy of the body here, so that the indexes find it under its
-- own booking, and not under its first delivery's. The index of body_from, made first,
-- finds them without another read of every row.
CREATE INDEX deliveries_body_from ON deliveries (body_from) WHERE body_from != 0;
UPDATE deliveries SET body = (SELECT f.body FROM deliveries AS f WHERE f.id = deliveries.body_from), body_from = 0
WHERE body_from != 0 AND NOT EXISTS (SELECT 1 FROM deliveries AS f WHERE f.id = deliveries.body_from
	AND f.body_from = 0 AND f.source = deliveries.source AND f.key = deliveries.key AND f.booking = deliveries.booking);
DROP INDEX deliveries_key;
CREATE INDEX deliveries_key ON deliveries (source, key) WHERE body_from = 0;
DROP INDEX deliveries_booking;
CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking != '' AND body_from = 0;
