-- The bookings that cancellations and refunds name were made weeks or months before, in
-- any order. Indexed by booking first, each new delivery wrote a leaf anywhere in an
-- index of millions of bookings: read from the disk first, written to the log whole,
-- then copied into the file by the next checkpoint, a page or more for each delivery.
-- Ordered first by the stretch of 16,384 delivery ids it falls in, a new entry lands
-- among the latest stretch's, a few dozen leaves that stay in the cache and that many
-- deliveries share; a booking is looked up once in each stretch (sqlBookingStretches:
-- 62 look-ups at 1 M deliveries, 306 at 5 M).
DROP INDEX deliveries_booking;
CREATE INDEX deliveries_booking ON deliveries (id / 16384, booking) WHERE booking != '' AND body_from = 0;
