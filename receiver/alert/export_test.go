package alert

// WaitDirect waits for the messages that Evaluate sends straight away, in the
// background (a database_not_ready alert that cannot be stored), as Run does before it
// returns.
func (e *Engine) WaitDirect() { e.directSends.Wait() }
