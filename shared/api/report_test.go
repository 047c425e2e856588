package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/report"
)

// TestRunReported: once a run has ended, its stored final message goes
// back to the pull request as the trigger says (a check run by default, a
// comment when asked; a fork's read_only run too), neutralised and with a
// token minted for that repository and that permission only; the ledger
// holds run.reported with ids and the body's digest, never the text; a run
// reports once, only after it ended, only when its runner token or the
// operator asks.
func TestRunReported(t *testing.T) {
	t.Parallel()
	s := newWorkspaceStack(t)
	s.setApp()
	const repo, fork = "Codertocat/Hello-World", "KaTeX/KaTeX"
	s.trigger(repo, nil)
	s.trigger(fork, map[string]any{"report": "comment"})
	s.gh.Install(repo, 31)
	s.gh.Install(fork, 32)
	sha := strings.Repeat("c", 40)
	run, token := s.pullRequestRun("same_repo.opened.json", "ec26c3e57ca3a959ca5aad62de7213c562f8c821", sha, "d-rep-1")

	if r := s.do("POST", "/v1/sessions/"+run+"/report", adminToken, nil); r.status != http.StatusConflict {
		t.Errorf("report before the end = %d %s, want 409", r.status, r.raw)
	}
	if r := s.do("POST", "/v1/sessions/"+run+"/report", token, nil); r.status != http.StatusForbidden {
		t.Errorf("report with the session token = %d, want 403", r.status)
	}
	hostile := "LGTM @octocat and @org/team, see <img src=x onerror=alert(1)> &amp; <!-- hidden -->"
	s.must(200, "POST", "/v1/sessions/"+run+"/end", adminToken, map[string]any{"reason": "exited", "exit_status": 0, "final_message": hostile})
	got := s.must(200, "POST", "/v1/sessions/"+run+"/report", adminToken, nil)
	if got["kind"] != "check_run" {
		t.Fatalf("report = %v, want a check run", got)
	}
	posts := s.gh.Posts()
	if len(posts) != 1 || posts[0].Kind != "check_run" || posts[0].Repository != repo || posts[0].Body["head_sha"] != sha || posts[0].Body["conclusion"] != "success" {
		t.Fatalf("posted = %+v, want one completed check run on %s at %s", posts, repo, sha)
	}
	checkReportedOnce(t, s, run, repo, posts[0].Body["output"].(map[string]any)["summary"].(string))

	// A fork's read_only run reports too, as a comment, with the runner token.
	body := bytes.ReplaceAll(payload(t, "fork.opened.json"), []byte("3ae9c36f8a03c1bd7e352bc683f72943dc92422e"), []byte(strings.Repeat("d", 40)))
	r := s.deliver(signed("d-rep-2", body))
	forkRun := r.body["session_id"].(string)
	forkTokens := s.must(200, "POST", "/v1/sessions/"+forkRun+"/token", adminToken, nil)
	runnerToken := forkTokens["runner_token"].(string)
	s.must(200, "POST", "/v1/sessions/"+forkRun+"/end", runnerToken, map[string]any{"reason": "timeout", "exit_status": -1, "final_message": "partial"})
	if got := s.must(200, "POST", "/v1/sessions/"+forkRun+"/report", runnerToken, nil); got["kind"] != "comment" {
		t.Errorf("fork report = %v, want a comment", got)
	}
	posts = s.gh.Posts()
	if len(posts) != 2 || posts[1].Kind != "comment" || posts[1].Repository != fork || posts[1].Number != "2388" || !strings.Contains(posts[1].Body["body"].(string), "timeout, exit status -1") {
		t.Errorf("posted = %+v, want a comment on %s#2388 saying timeout", posts, fork)
	}
	checkGrantsNarrow(t, s)
}

// checkReportedOnce: the check run's summary is the message neutralised,
// not dropped; a second report is 409; the ledger ends with run.reported
// holding the ids and the summary's digest.
func checkReportedOnce(t *testing.T, s *workspaceStack, run, repo, summary string) {
	t.Helper()
	for _, bad := range []string{"<img", "<!--", "@octocat", "@org/team"} {
		if strings.Contains(summary, bad) {
			t.Errorf("check run summary holds %q: %q", bad, summary)
		}
	}
	if !strings.Contains(summary, "@\u200doctocat") || !strings.Contains(summary, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("check run summary = %q, want the message neutralised, not dropped", summary)
	}
	if r := s.do("POST", "/v1/sessions/"+run+"/report", adminToken, nil); r.status != http.StatusConflict {
		t.Errorf("second report = %d %s, want 409", r.status, r.raw)
	}
	events := s.must(200, "GET", "/v1/sessions/"+run+"/events", adminToken, nil)["events"].([]any)
	last := events[len(events)-1].(map[string]any)
	wantEv := map[string]any{"kind": "check_run", "id": float64(9001), "repository": repo, "pull_request": float64(2), "body_digest": redact.DigestBytes([]byte(summary)).String()}
	if last["type"] != "run.reported" || !cmp.Equal(last["data"], any(wantEv)) {
		t.Errorf("last event = %v, want run.reported %v", last, wantEv)
	}
}

// checkGrantsNarrow: every token was minted for one repository and one
// permission.
func checkGrantsNarrow(t *testing.T, s *workspaceStack) {
	t.Helper()
	for _, g := range s.gh.Grants() {
		var perms []string
		for k, v := range g.Permissions {
			perms = append(perms, k+":"+v)
		}
		if len(perms) != 1 || len(g.Repositories) != 1 {
			t.Errorf("a token was minted for %v with %v, want one repository and one permission", g.Repositories, perms)
		}
	}
}

// TestReportFindsItsEarlierPost: a check run this App posted for the run
// before (a report whose record was lost after the post) is taken as the
// report, found past the first page of the commit's check runs, and
// nothing is posted again; one of another App with the run's id as its
// external_id is not the report (anybody's App or workflow can name a
// check run fluidbox), so a run with only such a one posts its own. A
// comment report does the same with the App's bot's comments.
func TestReportFindsItsEarlierPost(t *testing.T) {
	t.Parallel()
	s := newWorkspaceStack(t)
	s.setApp()
	const repo = "Codertocat/Hello-World"
	s.trigger(repo, nil)
	s.gh.Install(repo, 31)
	sha := strings.Repeat("e", 40)
	run, _ := s.pullRequestRun("same_repo.opened.json", "ec26c3e57ca3a959ca5aad62de7213c562f8c821", sha, "d-rep-once")
	s.must(200, "POST", "/v1/sessions/"+run+"/end", adminToken, map[string]any{"reason": "exited", "exit_status": 0})

	s.gh.PlantCheckRun(repo, sha, report.CheckName, run, 999)
	for i := range 120 {
		s.gh.PlantCheckRun(repo, sha, report.CheckName, fmt.Sprintf("ses_other%d", i), githubtest.AppID)
	}
	s.gh.PlantCheckRun(repo, sha, report.CheckName, run, githubtest.AppID)
	const earlier = 8000 + 1 + 120 // the planted check runs' ids count from 8000
	if got := s.must(200, "POST", "/v1/sessions/"+run+"/report", adminToken, nil); got["kind"] != report.CheckRun || got["id"] != float64(earlier) {
		t.Fatalf("report = %v, want the earlier check run %d", got, earlier)
	}
	if posts := s.gh.Posts(); len(posts) != 0 {
		t.Fatalf("posted %+v, want nothing: the run had reported", posts)
	}
	events := s.must(200, "GET", "/v1/sessions/"+run+"/events", adminToken, nil)["events"].([]any)
	if last := events[len(events)-1].(map[string]any); last["type"] != "run.reported" || last["data"].(map[string]any)["id"] != float64(earlier) {
		t.Errorf("last event = %v, want run.reported of check run %d", last, earlier)
	}

	// Only another App's check run names the next run: it reports.
	sha2 := strings.Repeat("f", 40)
	run2, _ := s.pullRequestRun("same_repo.opened.json", "ec26c3e57ca3a959ca5aad62de7213c562f8c821", sha2, "d-rep-twice")
	s.must(200, "POST", "/v1/sessions/"+run2+"/end", adminToken, map[string]any{"reason": "exited", "exit_status": 0})
	s.gh.PlantCheckRun(repo, sha2, report.CheckName, run2, 999)
	s.must(200, "POST", "/v1/sessions/"+run2+"/report", adminToken, nil)
	if posts := s.gh.Posts(); len(posts) != 1 || posts[0].Body["external_id"] != run2 {
		t.Errorf("posted %+v, want run %s's own check run", posts, run2)
	}
	checkCommentFoundAgain(t, s)
}

// checkCommentFoundAgain: a fork's run reporting as a comment finds the
// App's bot's earlier comment for it past the first page, and neither a
// person's nor another App's comment with the same header counts.
func checkCommentFoundAgain(t *testing.T, s *workspaceStack) {
	t.Helper()
	const fork, pr = "KaTeX/KaTeX", 2388
	s.trigger(fork, map[string]any{"report": "comment"})
	s.gh.Install(fork, 32)
	deliver := func(sha, delivery string) string {
		body := bytes.ReplaceAll(payload(t, "fork.opened.json"), []byte("3ae9c36f8a03c1bd7e352bc683f72943dc92422e"), []byte(sha))
		run := s.deliver(signed(delivery, body)).body["session_id"].(string)
		s.must(200, "POST", "/v1/sessions/"+run+"/end", adminToken, map[string]any{"reason": "exited", "exit_status": 0})
		return run
	}
	run := deliver(strings.Repeat("a", 40), "d-rep-comment")
	header := "**fluidbox run `" + run + "`**: exited, exit status 0."
	s.gh.PlantComment(fork, pr, "mallory", header)
	s.gh.PlantComment(fork, pr, "other-app[bot]", header)
	for i := range 120 {
		s.gh.PlantComment(fork, pr, githubtest.AppSlug+"[bot]", fmt.Sprintf("**fluidbox run `ses_other%d`**: exited", i))
	}
	s.gh.PlantComment(fork, pr, githubtest.AppSlug+"[bot]", header)
	const earlier = 7000 + 2 + 120 // the planted comments' ids count from 7000
	before := len(s.gh.Posts())
	if got := s.must(200, "POST", "/v1/sessions/"+run+"/report", adminToken, nil); got["kind"] != report.Comment || got["id"] != float64(earlier) {
		t.Fatalf("comment report = %v, want the earlier comment %d", got, earlier)
	}
	run2 := deliver(strings.Repeat("b", 40), "d-rep-comment-2")
	s.gh.PlantComment(fork, pr, "mallory", "**fluidbox run `"+run2+"`**: exited, exit status 0.")
	s.must(200, "POST", "/v1/sessions/"+run2+"/report", adminToken, nil)
	if posts := s.gh.Posts()[before:]; len(posts) != 1 || posts[0].Kind != report.Comment || !strings.Contains(posts[0].Body["body"].(string), run2) {
		t.Errorf("posted %+v, want only run %s's own comment", posts, run2)
	}
}
