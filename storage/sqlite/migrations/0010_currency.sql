-- Money in its currency. A delivery keeps the currency its amount is in (upper case,
-- '' when its source reads none), and the hourly totals sum amounts per currency: a sum
-- of euros and yen is no amount at all. Rows from before keep '' and are shown apart.
ALTER TABLE deliveries ADD COLUMN currency TEXT NOT NULL DEFAULT '';

-- The currency joins delivery_stats' key, which SQLite cannot change in place: the
-- table is rebuilt and its rows copied as they are (currency '').
CREATE TABLE delivery_stats_currency (
    source       TEXT    NOT NULL,
    hour         INTEGER NOT NULL,            -- received_at / 3600000
    outcome      TEXT    NOT NULL,
    currency     TEXT    NOT NULL DEFAULT '', -- of the amounts summed; '' for none or unknown
    deliveries   INTEGER NOT NULL DEFAULT 0,
    mismatches   INTEGER NOT NULL DEFAULT 0,
    with_amount  INTEGER NOT NULL DEFAULT 0,  -- deliveries that carried an amount
    amount       REAL    NOT NULL DEFAULT 0,  -- their amounts summed, in major units
    PRIMARY KEY (source, hour, outcome, currency)
) WITHOUT ROWID;
INSERT INTO delivery_stats_currency (source, hour, outcome, currency, deliveries, mismatches, with_amount, amount)
    SELECT source, hour, outcome, '', deliveries, mismatches, with_amount, amount FROM delivery_stats;
DROP TABLE delivery_stats;
ALTER TABLE delivery_stats_currency RENAME TO delivery_stats;
