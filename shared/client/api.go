package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/review"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// PermissionRequest is one tool call the runner asks about.
type PermissionRequest struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	// Cwd and ResolvedPaths are the runner's path context: its working
	// directory, and the sandbox's realpath of each path-bearing field.
	Cwd           string            `json:"cwd,omitempty"`
	ResolvedPaths map[string]string `json:"resolved_paths,omitempty"`
	// PathKinds says, per path-bearing field, what the sandbox found
	// there: "file", "dir" or "absent" (lstat).
	PathKinds map[string]string `json:"path_kinds,omitempty"`
	// SearchReport, with a Glob, is what the sandbox found under the
	// directory it walks (tree.Walk).
	SearchReport *tree.Report `json:"search_report,omitempty"`
	// AgentID and AgentType identify the subagent making the call (Claude
	// Code's hook input); empty for the main agent.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
}

// Answer is the gate's answer.
type Answer struct {
	Decision         vocab.Decision `json:"decision"`
	Source           string         `json:"source,omitempty"`
	Reason           string         `json:"reason,omitempty"`
	RuleID           string         `json:"rule_id,omitempty"`
	ApprovalID       string         `json:"approval_id,omitempty"`
	Verdict          string         `json:"verdict,omitempty"`
	RewrittenVerdict string         `json:"rewritten_verdict,omitempty"`
	// UpdatedInput, on an allow, is the input the tool must run with
	// instead of the one asked about (a narrowed search).
	UpdatedInput json.RawMessage `json:"updated_input,omitempty"`
}

// Approval is a call waiting for (or settled by) a human: the API's
// approval object, the type its server encodes as well as what this client
// decodes, so the two cannot drift apart.
type Approval struct {
	ID           string               `json:"id"`
	SessionID    string               `json:"session_id"`
	ToolCallID   string               `json:"tool_call_id"`
	ToolName     string               `json:"tool_name"`
	Input        json.RawMessage      `json:"input"`
	RuleID       string               `json:"rule_id,omitempty"`
	ScopeKey     string               `json:"scope_key"`
	DefaultScope string               `json:"default_scope"`
	Status       vocab.ApprovalStatus `json:"status"`
	RequestedAt  string               `json:"requested_at"`
	ExpiresAt    string               `json:"expires_at"`
	Decision     vocab.ApprovalStatus `json:"decision,omitempty"`
	DecidedBy    string               `json:"decided_by,omitempty"`
	DecidedAt    string               `json:"decided_at,omitempty"`
	Reason       string               `json:"reason,omitempty"`
	ConnectionID string               `json:"connection_id,omitempty"`
	// InputSize (bytes of the input's JSON) and InputDigest describe the
	// whole input, also where the list shows only its beginning.
	InputSize   int    `json:"input_size"`
	InputDigest string `json:"input_digest"`
	// InputTruncated: the input is not shown whole. Either the approval
	// keeps it cut for display (over permission.MaxShownInput), or, in a list,
	// it was over the list's cut, so Input is absent and InputPreview
	// holds its first bytes; Client.Approval has it as kept.
	InputTruncated bool   `json:"input_truncated,omitempty"`
	InputPreview   string `json:"input_preview,omitempty"`
	// Review is the rule and run the call came from (list and get).
	Review *review.Facts `json:"review,omitempty"`
	// Applied is set on a decision's answer: false when someone settled it
	// first or it had expired.
	Applied *bool `json:"applied,omitempty"`
}

// Event is one entry of a run's timeline.
type Event struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	At   string          `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Events is one page of a run's timeline.
type Events struct {
	Events  []Event `json:"events"`
	LastSeq int64   `json:"last_seq"`
}

// Budget is a run's budget in US dollars.
type Budget struct {
	LimitUSD     float64 `json:"limit_usd"`
	AvailableUSD float64 `json:"available_usd"`
	ReservedUSD  float64 `json:"reserved_usd"`
	SpentUSD     float64 `json:"spent_usd"`
}

// Session is a run as GET /v1/sessions/{id} shows it.
type Session struct {
	ID            string          `json:"id"`
	Status        vocab.RunStatus `json:"status"`
	TrustTier     string          `json:"trust_tier"`
	Autonomous    bool            `json:"autonomous"`
	ToolSetDigest string          `json:"tool_set_digest"`
	Tools         []string        `json:"tools"`
	Budget        Budget          `json:"budget"`
	LastSeq       int64           `json:"last_seq"`
}

// Session returns a run.
func (c *Client) Session(ctx context.Context, id string) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+pathID(id), nil, nil, &s, requestTimeout)
	return s, err
}

// Approvals returns every pending approval the caller may decide (their
// inbox), oldest first: it reads GET /v1/approvals page by page, following
// next_cursor to the end, so nothing hides past the first page. A server
// that hands back a cursor it gave before is an error, not a loop.
func (c *Client) Approvals(ctx context.Context) ([]Approval, error) {
	return allPages[Approval](ctx, c, "/v1/approvals", "approvals")
}

// allPages reads every page of an inbox list at path (its items under
// key), following next_cursor to the end; a cursor handed back twice is
// an error, not a loop.
func allPages[T any](ctx context.Context, c *Client, path, key string) ([]T, error) {
	all := []T{}
	seen := map[string]bool{}
	q := url.Values{"limit": {strconv.Itoa(approvalsPage)}}
	for {
		var out map[string]json.RawMessage
		if err := c.do(ctx, http.MethodGet, path, q, nil, &out, requestTimeout); err != nil {
			return nil, err
		}
		var items []T
		var next string
		if err := json.Unmarshal(out[key], &items); err != nil {
			return nil, fmt.Errorf("client: GET %s: %s: %w", path, key, err)
		}
		if raw, ok := out["next_cursor"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, fmt.Errorf("client: GET %s: next_cursor: %w", path, err)
			}
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("client: GET %s repeated a cursor after %d %s; the list does not end", path, len(all), strings.ReplaceAll(key, "_", " "))
		}
		seen[next] = true
		q.Set("cursor", next)
	}
}

// InputRequest is an input request on the wire (docs/api.md, "Input
// requests"): a brokered call waiting for a person to open a link its
// upstream asked for. The server encodes this type. Link is the
// upstream's URL without its query (what the ledger keeps), URL the same
// with its query, as the person must open it; both are the upstream's
// text. Server is the connection's name in fluidbox.
type InputRequest struct {
	ID           string `json:"id"`
	SessionID    string `json:"session_id"`
	ToolCallID   string `json:"tool_call_id"`
	ToolName     string `json:"tool_name"`
	ConnectionID string `json:"connection_id"`
	Server       string `json:"server"`
	Mode         string `json:"mode"`
	Link         string `json:"link"`
	URL          string `json:"url,omitempty"`
	Status       string `json:"status"`
	RequestedAt  string `json:"requested_at"`
	ExpiresAt    string `json:"expires_at"`
	DecidedBy    string `json:"decided_by,omitempty"`
	DecidedAt    string `json:"decided_at,omitempty"`
	// Applied is set on a decision's answer: whether this call settled it.
	Applied *bool `json:"applied,omitempty"`
}

// InputRequests returns every pending input request the caller may
// answer, oldest first, every page of GET /v1/input-requests.
func (c *Client) InputRequests(ctx context.Context) ([]InputRequest, error) {
	return allPages[InputRequest](ctx, c, "/v1/input-requests", "input_requests")
}

// InputRequest returns one input request.
func (c *Client) InputRequest(ctx context.Context, id string) (InputRequest, error) {
	var r InputRequest
	err := c.do(ctx, http.MethodGet, "/v1/input-requests/"+pathID(id), nil, nil, &r, requestTimeout)
	return r, err
}

// AnswerInput answers an input request, decision "done" or "decline", and
// returns it as settled; Applied says whether this call settled it.
func (c *Client) AnswerInput(ctx context.Context, id, decision string) (InputRequest, error) {
	body := struct {
		Decision string `json:"decision"`
	}{decision}
	var r InputRequest
	err := c.do(ctx, http.MethodPost, "/v1/input-requests/"+pathID(id)+"/decision", nil, body, &r, requestTimeout)
	return r, err
}

// approvalsPage is the page size Approvals asks for: the server's largest.
const approvalsPage = 100

// SessionApprovals returns all of a run's approvals, any status.
func (c *Client) SessionApprovals(ctx context.Context, sessionID string) ([]Approval, error) {
	var out struct {
		Approvals []Approval `json:"approvals"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+pathID(sessionID)+"/approvals", nil, nil, &out, requestTimeout)
	return out.Approvals, err
}

// Approval returns one approval.
func (c *Client) Approval(ctx context.Context, id string) (Approval, error) {
	var a Approval
	err := c.do(ctx, http.MethodGet, "/v1/approvals/"+pathID(id), nil, nil, &a, requestTimeout)
	return a, err
}

// Decide settles an approval with decision and returns it as settled;
// Applied says whether this call settled it.
func (c *Client) Decide(ctx context.Context, id string, decision vocab.Choice, reason string) (Approval, error) {
	body := struct {
		Decision vocab.Choice `json:"decision"`
		Reason   string       `json:"reason,omitempty"`
	}{decision, reason}
	var a Approval
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+pathID(id)+"/decision", nil, body, &a, requestTimeout)
	return a, err
}

// Events reads a run's events with seq > after, at most limit of them (0:
// the server's default), long-polling up to wait (at most MaxWait) when
// there are none yet.
func (c *Client) Events(ctx context.Context, sessionID string, after int64, limit int, wait time.Duration) (Events, error) {
	q := url.Values{}
	q.Set("after", strconv.FormatInt(after, 10))
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	wait = min(max(wait, 0), MaxWait)
	if secs := int(wait / time.Second); secs > 0 {
		q.Set("wait_seconds", strconv.Itoa(secs))
	}
	var out Events
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+pathID(sessionID)+"/events", q, nil, &out, wait+pollMargin)
	if out.Events == nil {
		out.Events = []Event{}
	}
	return out, err
}

// Permission asks the gate about one tool call. With wait > 0 a pending
// answer is waited for: the client asks again with the same tool_call_id
// (which records nothing new) in long polls of at most MaxWait, until the
// answer is final, wait has passed or ctx is done; it then returns the last
// answer, which may still be pending. While waiting, an unreachable server
// or a 503 is asked again with a short backoff: the approval is stored and
// a human may be deciding. A failure of the first ask is returned at once,
// and the caller treats it as deny.
func (c *Client) Permission(ctx context.Context, sessionID string, req PermissionRequest, wait time.Duration) (Answer, error) {
	deadline := time.Now().Add(max(wait, 0))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ans, err := c.ask(ctx, sessionID, req, time.Until(deadline))
	if err != nil || ans.Decision != vocab.Pending {
		return ans, err
	}
	backoff := 250 * time.Millisecond
	for {
		left := time.Until(deadline)
		if left < time.Second || ctx.Err() != nil {
			return ans, nil
		}
		next, err := c.ask(ctx, sessionID, req, left)
		switch {
		case err == nil:
			if next.Decision != vocab.Pending {
				return next, nil
			}
			ans, backoff = next, 250*time.Millisecond
		case ctx.Err() != nil:
			return ans, nil
		case transient(err):
			if !sleep(ctx, min(backoff, time.Until(deadline))) {
				return ans, nil
			}
			backoff = min(backoff*2, 5*time.Second)
		default:
			return Answer{}, err
		}
	}
}

// ask is one permission request, waiting up to wait (capped at MaxWait).
func (c *Client) ask(ctx context.Context, sessionID string, req PermissionRequest, wait time.Duration) (Answer, error) {
	q := url.Values{}
	wait = min(max(wait, 0), MaxWait)
	if secs := int(wait / time.Second); secs > 0 {
		q.Set("wait_seconds", strconv.Itoa(secs))
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	var ans Answer
	err := c.do(ctx, http.MethodPost, "/v1/sessions/"+pathID(sessionID)+"/permission", q, req, &ans, wait+pollMargin)
	if err == nil && ans.Decision == "" {
		return Answer{}, errors.New("client: the permission answer has no decision")
	}
	return ans, err
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
