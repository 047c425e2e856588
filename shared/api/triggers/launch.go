package triggers

import (
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// How a launched run's result goes back (the trigger's "report").
const (
	ReportCheckRun = "check_run"
	ReportComment  = "comment"
	ReportNone     = "none"
)

// Bounds of a trigger's launch fields.
const (
	DefaultTimeoutSeconds = 3600
	MinTimeoutSeconds     = 60
	MaxTimeoutSeconds     = 86400
	// MaxPromptBytes bounds the prompt: it is one argument of claude -p.
	MaxPromptBytes = 32 << 10
)

func reportOrDefault(r string) string {
	if r == "" {
		return ReportCheckRun
	}
	return r
}

func timeoutOrDefault(n int) int {
	if n == 0 {
		return DefaultTimeoutSeconds
	}
	return n
}

// checkLaunch validates the fields that say how a run's agent is launched.
func checkLaunch(req triggerRequest) *route.Error {
	switch req.Report {
	case "", ReportCheckRun, ReportComment, ReportNone:
	default:
		return route.Invalid("report: must be %q, %q or %q", ReportCheckRun, ReportComment, ReportNone)
	}
	if n := req.TimeoutSeconds; n != 0 && (n < MinTimeoutSeconds || n > MaxTimeoutSeconds) {
		return route.Invalid("timeout_seconds: must be %d to %d", MinTimeoutSeconds, MaxTimeoutSeconds)
	}
	if len(req.Prompt) > MaxPromptBytes || !utf8.ValidString(req.Prompt) {
		return route.Invalid("prompt: must be UTF-8 of at most %d bytes", MaxPromptBytes)
	}
	for _, c := range req.Prompt {
		if c == 0 {
			return route.Invalid("prompt: must not contain NUL")
		}
	}
	return nil
}
