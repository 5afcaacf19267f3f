-- The claims sweep's index, of the claims it may delete only: those settled (processed)
-- or released. A key still owed downstream (processing, or failed and waiting for an
-- operator) is never swept, however long expired; through an index of every claim's
-- expiry each batch read past all of those again (a downstream outage leaves many
-- failed keys, the oldest expiries, in front). Intake adds an entry only for a key it
-- does not hand downstream; a handed-off key gets one when it settles. Created once,
-- it reads every claim.
CREATE INDEX claims_expiring ON claims (expires_at) WHERE state IN ('processed', 'released');
DROP INDEX claims_expires_at;
