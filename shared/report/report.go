// Package report sends a finished run's result back to the pull request
// that started it, as the control plane's own act: a check run on the
// frozen commit or a comment on the pull request (the trigger's
// "report"), with an installation token minted for that repository and
// that one permission. It is not a tool call of the agent, so a read_only
// run reports too: reviewing a stranger's pull request is the point.
//
// Guarantees: the text is the run's stored final message (what its runner
// reported when it ended the run), never anything a request carries; it
// is untrusted, so it is bounded (MaxBody) and neutralised before it is
// posted: every '@' that could start a mention or a team reference is
// followed by a zero-width joiner, and '&', '<' and '>' become entities,
// so no HTML and no mention reaches GitHub. A run reports once (a REPORT
// item written with the ledger's run.reported, which holds ids and the
// posted body's digest, never the text); a post whose record was lost is
// found again (a check run by its external_id, a comment by its header,
// the App's own only) and not posted twice.
package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v88/github"

	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// How a run reports (the trigger's "report").
const (
	CheckRun = "check_run"
	Comment  = "comment"
	None     = "none"
)

// MaxBody bounds the posted text, in bytes: below GitHub's 65535 for a
// check run's summary and a comment's body, with room for the frame.
const MaxBody = 60000

// CheckName is the check run's name on the pull request.
const CheckName = "fluidbox"

// Errors of a report.
var (
	// ErrNotEnded: the run has not ended; there is nothing to report.
	ErrNotEnded = errors.New("report: the run has not ended")
	// ErrNoPullRequest: the run has no commit to report on (it came from
	// neither a pull request nor a schedule), or asks for a comment and
	// has no pull request.
	ErrNoPullRequest = errors.New("report: the run has no pull request to report to")
	// ErrReported: the run reported already.
	ErrReported = errors.New("report: the run reported already")
)

// Service reports runs.
type Service struct {
	led  *ledger.Ledger
	st   *store.Store
	apps *githubapp.Apps
	now  func() time.Time
}

// New returns the report service.
func New(led *ledger.Ledger, apps *githubapp.Apps, now func() time.Time) *Service {
	return &Service{led: led, st: led.Store(), apps: apps, now: now}
}

// Reported is what a report did.
type Reported struct {
	Kind string `json:"kind"`
	ID   int64  `json:"id,omitempty"`
}

// Report posts id's result as its trigger says, once.
func (s *Service) Report(ctx context.Context, id string) (Reported, error) {
	h, kind, err := s.reportKind(ctx, id)
	if err != nil {
		return Reported{}, err
	}
	if kind == None {
		return Reported{Kind: None}, nil
	}
	res, err := s.st.GetResult(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// Ended without a runner's result (by hand): nothing it said.
		res = store.Result{Reason: string(run.EndFailed), ExitStatus: -1}
	} else if err != nil {
		return Reported{}, err
	}
	body := Body(id, res)
	var out Reported
	switch kind {
	case CheckRun:
		out, err = s.postCheckRun(ctx, id, h.GitHub, res, body)
	case Comment:
		out, err = s.postComment(ctx, id, h.GitHub, body)
	default:
		return Reported{}, fmt.Errorf("report: trigger's report %q is not one this version knows", kind)
	}
	if err != nil {
		return Reported{}, err
	}
	return s.record(ctx, id, h.GitHub, out, body)
}

// reportKind reads the run and how its trigger reports it, refusing a run
// without a commit, one that has not ended and one reported before.
func (s *Service) reportKind(ctx context.Context, id string) (store.Head, string, error) {
	h, err := s.st.GetHead(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Head{}, "", run.ErrNotFound
	}
	if err != nil {
		return store.Head{}, "", err
	}
	// A scheduled run has a commit and no pull request: it reports as a
	// check run on that commit (a scheduled trigger cannot ask for a
	// comment).
	if h.GitHub == nil || h.GitHub.HeadSHA == "" {
		return store.Head{}, "", ErrNoPullRequest
	}
	if h.Status != vocab.Ended {
		return store.Head{}, "", ErrNotEnded
	}
	if _, err := s.st.GetReport(ctx, id); err == nil {
		return store.Head{}, "", ErrReported
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.Head{}, "", err
	}
	kind := CheckRun
	if t, err := s.st.GetTrigger(ctx, h.GitHub.TriggerID); err == nil && t.Report != "" {
		kind = t.Report
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Head{}, "", err
	}
	return h, kind, nil
}

// postCheckRun posts the result as a completed check run on the commit,
// once: a check run this App posted for the run before (its external_id is
// the run's id) whose record was lost (a crash, a failed write after the
// post) is taken as the report rather than posted again.
func (s *Service) postCheckRun(ctx context.Context, id string, gh *store.GitHubTrigger, res store.Result, body string) (Reported, error) {
	owner, name, _ := strings.Cut(gh.Repository, "/")
	inst, err := s.apps.Installation(ctx, gh.Repository, githubapp.WriteChecks)
	if err != nil {
		return Reported{}, err
	}
	if earlier, err := postedCheckRun(ctx, inst, owner, name, gh.HeadSHA, id); err != nil {
		return Reported{}, fmt.Errorf("%w: list the commit's check runs", githubapp.ErrUnavailable)
	} else if earlier != 0 {
		return Reported{Kind: CheckRun, ID: earlier}, nil
	}
	conclusion := "success"
	if res.Reason != string(run.EndExited) || res.ExitStatus != 0 {
		conclusion = "failure"
	}
	now := github.Timestamp{Time: s.now()}
	cr, _, err := inst.Client.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{
		Name: CheckName, HeadSHA: gh.HeadSHA, ExternalID: github.Ptr(id),
		Status: github.Ptr("completed"), Conclusion: github.Ptr(conclusion), CompletedAt: &now,
		Output: &github.CheckRunOutput{Title: github.Ptr("fluidbox run " + id), Summary: github.Ptr(body)},
	})
	if err != nil {
		return Reported{}, fmt.Errorf("%w: create the check run", githubapp.ErrUnavailable)
	}
	return Reported{Kind: CheckRun, ID: cr.GetID()}, nil
}

// maxPostPages bounds the search for an earlier post, at 100 items a
// page: past it (a commit with over a thousand fluidbox check runs, a pull
// request with over a thousand comments), the report is posted, a
// duplicate at worst.
const maxPostPages = 10

// searchPages reads pages until one holds a match: page(n) answers page
// n's match (0 for none) and the next page's number (0 after the last).
func searchPages(page func(n int) (match int64, next int, err error)) (int64, error) {
	n := 0
	for range maxPostPages {
		match, next, err := page(n)
		if err != nil || match != 0 || next == 0 {
			return match, err
		}
		n = next
	}
	return 0, nil
}

// postedCheckRun is the id of the check run named CheckName that inst's
// App posted on commit sha for run id, 0 if there is none. Only the App's
// own count: another App or a workflow may name a check run anything and
// give it any external_id.
func postedCheckRun(ctx context.Context, inst githubapp.Installation, owner, name, sha, id string) (int64, error) {
	return searchPages(func(n int) (int64, int, error) {
		res, resp, err := inst.Client.Checks.ListCheckRunsForRef(ctx, owner, name, sha, &github.ListCheckRunsOptions{
			CheckName: github.Ptr(CheckName), Filter: github.Ptr("all"), AppID: github.Ptr(inst.AppID),
			ListOptions: github.ListOptions{PerPage: 100, Page: n}})
		if err != nil {
			return 0, 0, err
		}
		for _, cr := range res.CheckRuns {
			if cr.GetExternalID() == id && cr.GetApp().GetID() == inst.AppID {
				return cr.GetID(), 0, nil
			}
		}
		return 0, resp.NextPage, nil
	})
}

// postedComment is the id of the comment the App's bot user wrote on pull
// request number for run id (Body's header names the run), 0 if there is
// none. Anybody may write that header; only the App's bot counts. An
// installation that names no App slug (GitHub always does) gives no bot
// to look for: 0, and the report is posted, a duplicate at worst, rather
// than never.
func postedComment(ctx context.Context, inst githubapp.Installation, owner, name string, number int, id string) (int64, error) {
	if inst.AppSlug == "" {
		return 0, nil
	}
	bot, header := inst.AppSlug+"[bot]", bodyHeader(id)
	return searchPages(func(n int) (int64, int, error) {
		cs, resp, err := inst.Client.Issues.ListComments(ctx, owner, name, number, &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100, Page: n}})
		if err != nil {
			return 0, 0, err
		}
		for _, c := range cs {
			if c.GetUser().GetLogin() == bot && c.GetUser().GetType() == "Bot" && strings.HasPrefix(c.GetBody(), header) {
				return c.GetID(), 0, nil
			}
		}
		return 0, resp.NextPage, nil
	})
}

// postComment posts the result as a comment on the pull request, once,
// as postCheckRun does: a comment the App's bot wrote for the run before
// is taken as the report.
func (s *Service) postComment(ctx context.Context, id string, gh *store.GitHubTrigger, body string) (Reported, error) {
	if gh.PullRequest == 0 {
		return Reported{}, ErrNoPullRequest
	}
	owner, name, _ := strings.Cut(gh.Repository, "/")
	inst, err := s.apps.Installation(ctx, gh.Repository, githubapp.WritePullRequests)
	if err != nil {
		return Reported{}, err
	}
	if earlier, err := postedComment(ctx, inst, owner, name, gh.PullRequest, id); err != nil {
		return Reported{}, fmt.Errorf("%w: list the pull request's comments", githubapp.ErrUnavailable)
	} else if earlier != 0 {
		return Reported{Kind: Comment, ID: earlier}, nil
	}
	c, _, err := inst.Client.Issues.CreateComment(ctx, owner, name, gh.PullRequest, &github.IssueComment{Body: github.Ptr(body)})
	if err != nil {
		return Reported{}, fmt.Errorf("%w: create the comment", githubapp.ErrUnavailable)
	}
	return Reported{Kind: Comment, ID: c.GetID()}, nil
}

// record writes what was posted, once: the report item and its event in
// one append. A second report of the run is ErrReported.
func (s *Service) record(ctx context.Context, id string, gh *store.GitHubTrigger, out Reported, body string) (Reported, error) {
	ev, err := redact.New(redact.RunReported{Kind: out.Kind, ID: out.ID, Repository: gh.Repository,
		PullRequest: gh.PullRequest, BodyDigest: redact.DigestBytes([]byte(body))})
	if err != nil {
		return out, err
	}
	op, err := s.st.PutReport(id, store.Report{Kind: out.Kind, ID: out.ID, ReportedAt: store.FormatTime(s.now())})
	if err != nil {
		return out, err
	}
	_, err = s.led.Append(ctx, id, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{op}}, nil
	})
	if errors.Is(err, store.ErrExists) {
		return out, ErrReported
	}
	return out, err
}

// bodyHeader starts every report of run id: how a posted comment is known
// again.
func bodyHeader(id string) string { return "**fluidbox run `" + id + "`**" }

// Body is the posted text of a run's result: a fixed header fluidbox
// writes, then the agent's final message, bounded and neutralised.
func Body(id string, res store.Result) string {
	head := fmt.Sprintf("%s: %s, exit status %d.\n\n", bodyHeader(id), res.Reason, res.ExitStatus)
	msg := Neutralise(res.FinalMessage)
	if msg == "" {
		return head + "_The agent left no final message._"
	}
	if room := MaxBody - len(head); len(msg) > room {
		const cut = "\n\n_(cut: the message was longer)_"
		msg = strings.ToValidUTF8(msg[:room-len(cut)], "") + cut
	}
	return head + msg
}

// zwj breaks a mention: "@\u200dname" renders as "@name" and notifies
// nobody.
const zwj = "\u200d"

// Neutralise makes untrusted text safe to post as GitHub Markdown: HTML
// metacharacters become entities (no tag, comment or entity of the
// agent's survives) and every '@' gets a zero-width joiner after it (no
// user, team or email-like mention notifies anyone). Invalid UTF-8 and NUL
// are dropped.
func Neutralise(s string) string {
	s = strings.ToValidUTF8(s, "")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '@':
			b.WriteString("@" + zwj)
		case 0:
		default:
			if r == utf8.RuneError {
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
