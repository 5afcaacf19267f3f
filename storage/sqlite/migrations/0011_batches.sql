-- Batched deliveries: one request carrying several events (Adyen's notificationItems,
-- Mews' Events) is stored as one delivery per item, each keyed and claimed on its own.
-- batch is the id of the request's first item delivery (0: not part of a batch) and
-- batch_index the item's place in the request, from 0, so that the console can show a
-- request with its items and each item with its siblings.
ALTER TABLE deliveries ADD COLUMN batch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN batch_index INTEGER NOT NULL DEFAULT 0;
CREATE INDEX deliveries_batch ON deliveries (batch, batch_index) WHERE batch != 0;
