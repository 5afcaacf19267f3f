-- The money each operator reprocessed without a second operator's approval, kept for
-- the last day (storage.ReprocessWindow): a key reprocessed under the thresholds, a row
-- with its first delivery's amount; a bulk reprocess started under them, a row per
-- currency with its gross. A reprocess is compared with the thresholds together with
-- the same operator's rows, so that splitting one into several does not go round
-- four-eyes.
CREATE TABLE reprocessed (
    id       INTEGER PRIMARY KEY,
    actor    TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    currency TEXT    NOT NULL,
    amount   TEXT    NOT NULL
);
CREATE INDEX reprocessed_actor ON reprocessed (actor, at);
