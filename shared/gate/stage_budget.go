package gate

// Stage 1, budget: a run that has spent its allowance stops here, before
// anything about the call itself is looked at.
//
// Why here: it is the cheapest check and it reads one number, so an
// exhausted run costs nothing further (no schema walk, no policy
// evaluation, and no pending approval that would ask a human to approve
// work the run cannot pay for). No later stage can catch it: the tool set,
// schema, trust tier and policy are all about whether this call is
// acceptable, not whether the run may still spend. The admission of model
// requests books reservations against the same number, so a value the
// caller read as zero or below means nothing is left; it is never treated
// as "unknown, let it through".
func checkBudget(c *call) (Decision, bool) {
	if c.run.AvailableMicros <= 0 {
		return deny(SourceBudget, "this run's budget is exhausted; no further tool calls are allowed")
	}
	return next()
}
