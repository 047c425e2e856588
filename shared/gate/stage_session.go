package gate

// Stage 0, session: a run that has ended, or that the caller could not
// produce at all, decides nothing more.
//
// Why first: every later stage reads the run's state, and an ended run's
// state is final, not current (its budget is settled, its bindings may have
// been released). Answering from it would let a runner that outlived its run
// keep acting under the run's name. No later stage can catch this, because
// none of them knows whether the run is still live: a stale run can have
// budget left, a frozen tool set that still matches, and a policy that
// allows the call. A nil run is the missing record: it is denied here, so no
// later stage ever dereferences it.
func checkSession(c *call) (Decision, bool) {
	if c.run == nil {
		return deny(SourceSession, "this run could not be found, so no tool call can be allowed")
	}
	if c.run.Ended {
		return deny(SourceSession, "this run has ended; no further tool calls are allowed")
	}
	return next()
}
