package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// ErrNoBranch: the repository has no such branch (GitHub answered 404).
var ErrNoBranch = errors.New("githubapp: no such branch")

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// BranchHead is the commit at the head of repo's branch, and the branch's
// name: the repository's default branch when branch is "". It reads with
// a token restricted to the repository and contents: read, the commit a
// scheduled run freezes.
func (a *Apps) BranchHead(ctx context.Context, repo, branch string) (sha, name string, err error) {
	inst, err := a.Installation(ctx, repo, ReadContents)
	if err != nil {
		return "", "", err
	}
	owner, repoName, _ := strings.Cut(repo, "/")
	if branch == "" {
		r, resp, err := inst.Client.Repositories.Get(ctx, owner, repoName)
		if err != nil {
			return "", "", fmt.Errorf("%w: read repository %s: %s", ErrUnavailable, repo, statusOf(resp))
		}
		if branch = r.GetDefaultBranch(); branch == "" {
			return "", "", fmt.Errorf("githubapp: repository %s has no default branch: %w", repo, ErrNoBranch)
		}
	}
	b, resp, err := inst.Client.Repositories.GetBranch(ctx, owner, repoName, branch, 0)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return "", "", fmt.Errorf("githubapp: %s has no branch %q: %w", repo, branch, ErrNoBranch)
		}
		return "", "", fmt.Errorf("%w: read branch of %s: %s", ErrUnavailable, repo, statusOf(resp))
	}
	sha = b.GetCommit().GetSHA()
	if !commitPattern.MatchString(sha) {
		return "", "", fmt.Errorf("%w: branch of %s answered no commit id", ErrUnavailable, repo)
	}
	return sha, branch, nil
}
