-- The sources each running dispatcher hands downstream, renewed every few seconds. During
-- a rolling change of the sources, replicas run different configurations: one that has
-- a source without a forward_url settles that source's queued keys unsent only while no
-- dispatcher seen lately forwards it, however far behind that one is.
CREATE TABLE dispatchers (
    id         text   PRIMARY KEY,
    forwarding text[] NOT NULL,
    seen_at    bigint NOT NULL
);

-- The queue by source: a dispatcher leases only its own sources' keys, each source's
-- oldest first, without walking past the due keys of sources it does not have.
DROP INDEX claims_due;
CREATE INDEX claims_due ON claims (source, next_attempt_at, id) WHERE state = 'processing';
