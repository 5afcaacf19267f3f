-- A bulk release tells the claim its preview listed from a later claim of the same key,
-- once both are swept, by their traces' first delivery: delivery ids come from a
-- sequence that never goes back. Their times cannot tell them apart: a claim's time is
-- its delivery's arrival, stamped before the delivery waited for its transaction and on
-- the clock of whichever replica took it, so a later claim could be stamped before the
-- preview and the previewed one after it.
-- NULL for keys previewed before this version: swept by the run, those are skipped,
-- since their trace may be a later claim's, and a skipped key forgets nothing.
ALTER TABLE bulk_action_keys ADD COLUMN first_delivery bigint;
-- A key of an action not yet run whose claim is as its preview found it (the run's own
-- test of an unchanged key) still has the previewed claim: it gets its first delivery
-- here, so that only the keys swept or changed before this version are skipped.
UPDATE bulk_action_keys AS k SET first_delivery = c.first_delivery
FROM claims AS c
WHERE c.id = k.claim AND c.state = k.state AND c.updated_at = k.updated_at
    AND k.outcome = '' AND k.action IN (SELECT id FROM bulk_actions
        WHERE state IN ('building', 'preview', 'pending_approval', 'queued', 'running'));
