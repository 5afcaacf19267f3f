-- The last delivery id issued, so that no id is ever issued twice. Claims, attempts and
-- the dashboard's rollup mark name deliveries by id; an id taken again after the
-- deliveries holding it were swept (max(id) + 1 on an emptied table) made a new
-- delivery pass for the old one: another event's payload handed downstream under the
-- first one's key. The writer advances this one row once per batch (record.go).
CREATE TABLE delivery_seq (
    only INTEGER PRIMARY KEY CHECK (only = 1),
    last INTEGER NOT NULL
);
-- It starts above every id still named anywhere: the deliveries', and those that claims,
-- attempts and the rollup mark name although their delivery may be gone. The claims and
-- attempts are read whole once, here: no index holds those ids.
INSERT INTO delivery_seq (only, last) VALUES (1, max(
    (SELECT coalesce(max(id), 0) FROM deliveries),
    (SELECT coalesce(max(first_delivery), 0) FROM claims),
    (SELECT coalesce(max(delivery), 0) FROM attempts),
    (SELECT coalesce(max(rolled_up_to), 0) FROM delivery_stats_mark)));
