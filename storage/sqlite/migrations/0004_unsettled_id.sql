-- The keys page's processing and failed tabs, newest first, straight from an index. From
-- claims_unsettled (ordered by updated_at) they sorted every unsettled key to show the
-- newest 100: 0.34 s with 600,000 keys left unsettled by a downstream outage, which is
-- when support staff need the page. Intake adds an entry only for keys it hands
-- downstream, at the index's end (ids grow), and removes it when the key settles.
CREATE INDEX claims_unsettled_id ON claims (state, id) WHERE state IN ('processing', 'failed');
