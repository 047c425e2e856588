package gate

// Sources of a brokered call that met an upstream's request for a person's
// input (shared/elicitation). Like SourceApproval, they are recorded by the
// broker, never returned by Decide.
const (
	// SourceInputRequired: the upstream asked for a person to open a link
	// before it would finish the call; the call waits for them.
	SourceInputRequired Source = "input_required"
	// SourceInputDeclined: a person declined to open the link.
	SourceInputDeclined Source = "input_declined"
	// SourceInputExpired: nobody answered the request in time.
	SourceInputExpired Source = "input_expired"
)
