-- Released keys, for the keys page's state filter: without it, listing them walked every
-- claim when few were released (1.1 s with 5 M keys). Intake never writes this state.
CREATE INDEX claims_released ON claims (id) WHERE state = 'released';
