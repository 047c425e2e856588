package triggers

import (
	"regexp"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/schedule"
)

// A trigger's schedule and ref are checked here; shared/schedule/firing
// fires them.

// maxRefBytes bounds a branch name (git's own limit on a ref is the file
// system's; GitHub's is 255 bytes).
const maxRefBytes = 255

var refPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`)

// validBranch accepts branch names git accepts, in a conservative
// alphabet: no "..", "//", "@{", control characters or spaces; no
// component that starts with "." or ends with ".lock"; not "HEAD" and not
// a full ref name ("refs/...").
func validBranch(ref string) bool {
	if len(ref) > maxRefBytes || !refPattern.MatchString(ref) || ref == "HEAD" || strings.HasPrefix(ref, "refs/") {
		return false
	}
	for _, c := range strings.Split(ref, "/") {
		if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") || strings.HasSuffix(c, ".") {
			return false
		}
	}
	return !strings.Contains(ref, "..")
}

// checkSchedule validates a configuration's schedule and ref.
func (s *Server) checkSchedule(req triggerRequest) *route.Error {
	if req.Schedule == "" {
		if req.Ref != "" {
			return route.Invalid("ref: only a trigger with a schedule takes a ref (a pull request's run takes the pull request's head)")
		}
		return nil
	}
	expr, err := schedule.Parse(req.Schedule)
	if err != nil {
		return route.Invalid("schedule: %s", err.Error())
	}
	now := s.cfg.Now()
	if _, ok := expr.Next(now, now); !ok {
		return route.Invalid("schedule: the expression is never due again (its years are past)")
	}
	if req.Ref != "" && !validBranch(req.Ref) {
		return route.Invalid("ref: must be a branch name of at most %d bytes (letters, digits, '.', '_', '-' and '/'), as \"main\", not \"refs/heads/main\"", maxRefBytes)
	}
	if req.Report == ReportComment {
		return route.Invalid("report: a scheduled run has no pull request to comment on; use %q (on the commit it ran on) or %q", ReportCheckRun, ReportNone)
	}
	if req.Prompt == "" {
		// Nobody waits on a scheduled run: without a prompt it would never
		// be launched, and every due time would leave one more open run.
		return route.Invalid("prompt: a trigger with a schedule needs a prompt (what its runs' agents are asked)")
	}
	return nil
}
