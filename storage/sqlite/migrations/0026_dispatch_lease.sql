-- The end of the dispatch lease last taken on a key (storage.Job.Lease). A lease sets
-- next_attempt_at and leased_until alike; an attempt's end moves next_attempt_at on, so
-- the two are equal while an attempt is in flight. Each lease ends after the one before
-- it, so the value also tells one lease from another: an attempt that outlived its
-- lease cannot move a key that another dispatcher has leased since.
ALTER TABLE claims ADD COLUMN leased_until INTEGER;
