package storage

// SweepCursor is where a retention sweep goes on from. The zero value starts a walk.
// Its fields belong to the engine that made it: callers pass it back unchanged.
type SweepCursor struct {
	Last     int64 // the last delivery looked at
	Upto     int64 // the walk's last delivery
	Finished bool
}

// Done reports whether the sweep has looked at every delivery received before its cutoff.
func (c SweepCursor) Done() bool { return c.Finished }
