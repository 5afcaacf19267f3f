-- When an evaluation last found each active alert's condition holding. Replicas
-- evaluate at their own moments: a condition that flaps may hold at one's evaluations
-- and be clear at another's, and each replica's own memory of when it saw the condition
-- clear would resolve the alert, and the next sighting open a new one, over and over.
-- Held here by any replica, the alert resolves only once no replica saw it hold for the
-- rule's clear period. An alert active before this is taken as held when it last changed.
ALTER TABLE alerts ADD COLUMN held_at bigint NOT NULL DEFAULT 0;
UPDATE alerts SET held_at = updated_at WHERE state <> 'resolved';
