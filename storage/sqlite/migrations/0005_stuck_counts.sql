-- The stuck-keys count, per source, from this index alone. Through claims_unsettled it
-- read each unsettled claim's row for its source and state: 0.23 s with 600,000 keys
-- left unsettled by a downstream outage, every 15 s for the gauge and on each dashboard
-- and keys page, which is when support staff look. Covering, in source order, the count
-- needs no row and no sort: 45 ms there. Like the other two indexes of unsettled keys,
-- intake adds an entry only for keys it hands downstream, near the end of its source's
-- processing entries (updated_at is now), and settling the key removes it.
CREATE INDEX claims_stuck ON claims (source, state, updated_at) WHERE state IN ('processing', 'failed');
