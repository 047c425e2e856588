// Package trust derives a run's trust tier from what triggered it.
//
// There are two tiers. A read_only run may read and review but never write,
// execute, reach the network or touch a secret; the gate enforces that above
// policy and above human approval. The derivation fails toward read_only:
// anything this package cannot prove trusted is not, and no request can
// widen a tier (Narrow).
package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// Tier is a run's trust tier. Persisted and on the wire: never renamed.
type Tier string

const (
	Trusted  Tier = "trusted"
	ReadOnly Tier = "read_only"
)

// Valid reports whether t is one of the two tiers.
func (t Tier) Valid() bool { return t == Trusted || t == ReadOnly }

// Narrow combines the tier a caller asked for with the tier derived from the
// trigger. Only an explicit read_only request changes anything: asking for
// trusted, or for nothing (""), yields the derived tier. Any unknown value
// on either side yields read_only. The result is never wider than derived.
func Narrow(requested, derived Tier) Tier {
	if derived != Trusted {
		return ReadOnly
	}
	switch requested {
	case "", Trusted:
		return Trusted
	}
	return ReadOnly
}

// PullRequest is what a run needs from a GitHub pull_request webhook.
// BaseRepo and HeadRepo are full names ("owner/name"); HeadRepo is empty
// when GitHub no longer shows the head repository (a deleted fork). Fork is
// true unless the head repository is provably the base repository and not a
// fork; Tier is read_only exactly when Fork is true.
type PullRequest struct {
	Action   string
	BaseRepo string
	HeadRepo string
	Number   int
	HeadSHA  string
	Tier     Tier
	Fork     bool
	// Author is the id of the pull request's author (pull_request.user.id,
	// which a rename does not change), in decimal; "" when the payload
	// has none.
	Author string
}

// MaxPayloadBytes is GitHub's own cap on webhook payloads.
const MaxPayloadBytes = 25 << 20

// ErrMalformed wraps every payload FromPullRequest cannot use.
var ErrMalformed = errors.New("trust: malformed pull_request payload")

// shaPattern is compiled on first use: its counted repetitions cost every
// function that links trust about 0.1 ms of init otherwise.
var shaPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`) })

type repoJSON struct {
	ID       *int64 `json:"id"`
	FullName string `json:"full_name"`
	Fork     *bool  `json:"fork"`
}

type payloadJSON struct {
	Action      *string `json:"action"`
	Number      *int    `json:"number"`
	PullRequest *struct {
		Number *int `json:"number"`
		User   *struct {
			ID *int64 `json:"id"`
		} `json:"user"`
		Head *struct {
			SHA  string    `json:"sha"`
			Repo *repoJSON `json:"repo"`
		} `json:"head"`
		Base *struct {
			Repo *repoJSON `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	Repository *repoJSON `json:"repository"`
}

// FromPullRequest parses the body of a GitHub pull_request webhook delivery
// (its signature must already be verified) and derives the trust tier. The
// run is read_only when the head repository is missing or null, is a fork,
// or differs from the base repository by id or full name. A payload that
// lacks what the decision needs is an error wrapping ErrMalformed.
func FromPullRequest(payload []byte) (PullRequest, error) {
	if len(payload) > MaxPayloadBytes {
		return PullRequest{}, malformed("payload is %d bytes, over the %d limit", len(payload), MaxPayloadBytes)
	}
	var p payloadJSON
	if err := json.Unmarshal(payload, &p); err != nil {
		return PullRequest{}, malformed("%v", err)
	}
	pr := p.PullRequest
	switch {
	case p.Action == nil || *p.Action == "":
		return PullRequest{}, malformed("action is missing")
	case pr == nil:
		return PullRequest{}, malformed("pull_request is missing")
	case pr.Head == nil:
		return PullRequest{}, malformed("pull_request.head is missing")
	case !shaPattern().MatchString(pr.Head.SHA):
		return PullRequest{}, malformed("pull_request.head.sha %q is not a commit id", pr.Head.SHA)
	case pr.Base == nil || pr.Base.Repo == nil:
		return PullRequest{}, malformed("pull_request.base.repo is missing")
	case pr.Base.Repo.ID == nil || pr.Base.Repo.FullName == "":
		return PullRequest{}, malformed("pull_request.base.repo has no id or full_name")
	}
	number, err := prNumber(p.Number, pr.Number)
	if err != nil {
		return PullRequest{}, err
	}
	base := pr.Base.Repo
	if r := p.Repository; r != nil && (r.ID == nil || *r.ID != *base.ID || r.FullName != base.FullName) {
		// The delivery is for one repository and the PR targets another:
		// nothing sensible can be derived from that.
		return PullRequest{}, malformed("repository does not match pull_request.base.repo")
	}

	out := PullRequest{
		Action:   *p.Action,
		BaseRepo: base.FullName,
		Number:   number,
		HeadSHA:  pr.Head.SHA,
	}
	if pr.User != nil && pr.User.ID != nil {
		out.Author = strconv.FormatInt(*pr.User.ID, 10)
	}
	head := pr.Head.Repo
	if head != nil {
		out.HeadRepo = head.FullName
	}
	out.Fork = !sameRepo(head, base)
	out.Tier = Trusted
	if out.Fork {
		out.Tier = ReadOnly
	}
	return out, nil
}

// sameRepo is true only when head is present, says it is not a fork, and has
// the base's id and full name. Every missing field counts as "different".
func sameRepo(head, base *repoJSON) bool {
	return head != nil &&
		head.Fork != nil && !*head.Fork &&
		head.ID != nil && *head.ID == *base.ID &&
		head.FullName != "" && head.FullName == base.FullName
}

func prNumber(top, inner *int) (int, error) {
	switch {
	case top == nil && inner == nil:
		return 0, malformed("number is missing")
	case top != nil && inner != nil && *top != *inner:
		return 0, malformed("number %d does not match pull_request.number %d", *top, *inner)
	}
	n := top
	if n == nil {
		n = inner
	}
	if *n <= 0 {
		return 0, malformed("number %d is not positive", *n)
	}
	return *n, nil
}

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}
