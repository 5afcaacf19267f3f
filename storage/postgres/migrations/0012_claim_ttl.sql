-- The window a claim was made for, in milliseconds, once a reprocess of the expired
-- claim holds its key for it again from then: expires_at moves and claimed_at stays
-- (the job's generation and the business key's seen time), so expires_at - claimed_at,
-- which tells the window until then, would lengthen with each such reprocess. NULL
-- while it still tells it; intake's takeover of the key sets it back to NULL.
ALTER TABLE claims ADD COLUMN ttl bigint;
