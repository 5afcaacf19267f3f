package postgrestest

// Stop stops the cluster now, if one is running, and removes it, rather than when the
// tests end: for a test process that is done with PostgreSQL and measures something
// else next (the load harness), so that the cluster's background work (checkpoints,
// autovacuum) does not run into it. The databases not yet dropped go with it; the
// cleanups of their tests then have nothing to do. A later NewDatabase starts a new
// cluster.
func Stop() error {
	mu.Lock()
	c := cl
	cl, started, startErr = nil, false, nil
	mu.Unlock()
	if c == nil {
		return nil
	}
	return c.stop()
}
