package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/bash"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The Claude Code hook: `fluidbox hook claude-code`, configured as a
// PreToolUse command hook, asks the gate about every tool call Claude Code
// is about to make.
//
// Paths: the hook sends Claude Code's cwd and, for every path field of a
// file tool, the path resolved in the sandbox (symlinks followed, a link
// to a file not written yet too) and what is there (lstat: file, dir or
// absent); the gate allows the call only if both the given and the
// resolved path are allowed, denies it if either is denied, and judges a
// Grep of a file as that file rather than a tree.
//
// Glob: it has no way to leave paths out, so the hook walks the directory
// it searches and sends what exists there (search_report, package tree);
// the gate denies it only if that holds a path a deny rule matches.
//
// Narrowed calls: an allow may carry updated_input (a search narrowed to
// leave out what a deny rule matches); the hook answers with it as
// Claude Code's updatedInput, which Claude Code then runs instead of its
// own input, and says so in the reason.
//
// Protocol (code.claude.com/docs/en/hooks, PreToolUse): one JSON object on
// stdin with session_id, transcript_path, cwd, permission_mode,
// hook_event_name, tool_name, tool_input and tool_use_id; the answer is
// JSON on stdout, {"hookSpecificOutput":{"hookEventName":"PreToolUse",
// "permissionDecision":"allow"|"deny"|"ask","permissionDecisionReason",
// "updatedInput"?}},
// read only when the hook exits 0. A deny's reason is shown to the model.
//
// Fail closed. Claude Code treats a hook that exits non-zero (other than
// 2), that cannot start, or that runs past its timeout as a non-blocking
// error, and the tool call goes ahead. So every failure here — bad stdin,
// missing environment, an unreachable server, a 5xx, an answer we do not
// know, no decision in time — is answered with a deny in JSON and exit 0.
// Only if stdout itself cannot be written does the hook exit 2, which
// Claude Code documents as "block the call, show stderr to Claude". And the
// hook's own deadline (FLUIDBOX_HOOK_TIMEOUT_SECONDS) must stay below the
// hook timeout Claude Code enforces (600 seconds by default for command
// hooks; set "timeout" in settings.json), so it is the hook that answers
// deny, not Claude Code that gives up on it.

// Hook limits.
const (
	// maxHookInput bounds stdin; the API takes at most 1 MiB of body.
	maxHookInput = 1 << 20
	// defaultHookTimeout is the total time the hook waits for a decision,
	// a minute below Claude Code's default hook timeout of 600 seconds.
	defaultHookTimeout = 540 * time.Second
	maxHookTimeout     = 24 * time.Hour
)

// preToolUse is the hook input fluidbox reads; other fields are ignored.
type preToolUse struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// AgentID and AgentType are set when a subagent makes the call.
	AgentID   string `json:"agent_id"`
	AgentType string `json:"agent_type"`
}

// hookOutput is the only thing the hook writes on stdout.
type hookOutput struct {
	HookSpecificOutput hookDecision `json:"hookSpecificOutput"`
}

type hookDecision struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
	// UpdatedInput, with an allow, is the input Claude Code runs the tool
	// with instead of its own: the gate's updated_input (a narrowed
	// search). Claude Code runs a call the hook allows with it.
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
}

// hookConfig is the hook's environment.
type hookConfig struct {
	url       string
	sessionID string
	token     string
	timeout   time.Duration
}

func loadHookConfig(getenv func(string) string) (hookConfig, error) {
	c := hookConfig{
		url:       getenv("FLUIDBOX_URL"),
		sessionID: getenv("FLUIDBOX_SESSION_ID"),
		token:     getenv("FLUIDBOX_SESSION_TOKEN"),
		timeout:   defaultHookTimeout,
	}
	var missing []string
	for _, v := range []struct{ name, val string }{
		{"FLUIDBOX_URL", c.url}, {"FLUIDBOX_SESSION_ID", c.sessionID}, {"FLUIDBOX_SESSION_TOKEN", c.token},
	} {
		if v.val == "" {
			missing = append(missing, v.name)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, strings.Join(missing, ", ")+" not set")
	}
	// Only a run's session token rides in a sandbox: it is good for that
	// one run. The admin token (or the runner token) there would let the
	// sandbox approve its own calls, so the hook refuses to work with one
	// rather than spend it.
	if c.token != "" && !strings.HasPrefix(c.token, auth.SessionTokenPrefix) {
		problems = append(problems, "FLUIDBOX_SESSION_TOKEN is not a session token ("+auth.SessionTokenPrefix+"...); only a run's session token belongs in a sandbox, never the admin token or the runner token")
	}
	if getenv("FLUIDBOX_ADMIN_TOKEN") != "" {
		problems = append(problems, "FLUIDBOX_ADMIN_TOKEN is set in the sandbox's environment; the admin token must never ride in a sandbox: remove it and rotate it")
	}
	if s := getenv("FLUIDBOX_HOOK_TIMEOUT_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxHookTimeout {
			problems = append(problems, "FLUIDBOX_HOOK_TIMEOUT_SECONDS must be a whole number of seconds from 1 to 86400")
		} else {
			c.timeout = time.Duration(n) * time.Second
		}
	}
	if len(problems) > 0 {
		return c, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}

// hook runs `fluidbox hook <runner>` and returns the exit code.
func hook(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "claude-code" {
		fmt.Fprint(stderr, "usage: fluidbox hook claude-code   (a Claude Code PreToolUse command hook; reads the hook JSON on stdin)\n")
		return 2
	}
	dec := claudeCodeDecision(ctx, getenv, stdin, stderr)
	b, err := json.Marshal(hookOutput{dec})
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", b)
	}
	if err != nil {
		// Without our JSON, only exit 2 keeps the call from running.
		fmt.Fprintf(stderr, "fluidbox denied: the hook could not write its answer: %v\n", err)
		return 2
	}
	return 0
}

func allow(reason string) hookDecision {
	return hookDecision{HookEventName: "PreToolUse", PermissionDecision: "allow", PermissionDecisionReason: reason}
}

func deny(reason string) hookDecision {
	return hookDecision{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: reason}
}

// claudeCodeDecision asks the gate about the call on stdin. Whatever goes
// wrong, the answer is a deny whose reason says what.
func claudeCodeDecision(ctx context.Context, getenv func(string) string, stdin io.Reader, stderr io.Writer) hookDecision {
	fail := func(format string, args ...any) hookDecision {
		reason := "fluidbox denied this call: " + fmt.Sprintf(format, args...)
		fmt.Fprintln(stderr, reason)
		return deny(reason)
	}
	in, err := readHookInput(stdin)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := loadHookConfig(getenv)
	if err != nil {
		return fail("the hook is not configured: %v", err)
	}
	// TRACEPARENT (W3C trace context in the environment, as OpenTelemetry
	// passes it to child processes) makes the decision part of the turn's trace.
	c, err := client.New(cfg.url, cfg.token, client.WithTraceparent(getenv("TRACEPARENT")))
	if err != nil {
		return fail("the hook is not configured: FLUIDBOX_URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	// The run is fluidbox's (FLUIDBOX_SESSION_ID), not Claude Code's
	// session_id; Claude Code's tool_use_id names the call, so a retried
	// hook re-attaches to the same decision or approval.
	req := client.PermissionRequest{ToolCallID: in.ToolUseID, ToolName: in.ToolName, Input: in.ToolInput, AgentID: in.AgentID, AgentType: in.AgentType}
	// The gate judges the path as given and as the sandbox resolves it, so
	// a symlink a pull request committed (notes.txt -> ../.env) is judged
	// by what it points at.
	if filepath.IsAbs(in.Cwd) {
		req.Cwd = filepath.Clean(in.Cwd)
	}
	req.ResolvedPaths = resolvePaths(in.ToolInput, req.Cwd)
	req.PathKinds = pathKinds(in.ToolInput, req.Cwd)
	if in.ToolName == "Glob" {
		req.SearchReport = globReport(ctx, in.ToolInput, req.Cwd)
	}
	if in.ToolName == "Bash" {
		links, err := resolveOperands(in.ToolInput, req.Cwd)
		if err != nil {
			return fail("%v", err)
		}
		for k, v := range links {
			if req.ResolvedPaths == nil {
				req.ResolvedPaths = map[string]string{}
			}
			req.ResolvedPaths[k] = v
		}
	}
	ans, err := c.Permission(ctx, cfg.sessionID, req, cfg.timeout)
	switch {
	case errors.Is(err, client.ErrBadToken):
		return fail("the control plane refused FLUIDBOX_SESSION_TOKEN for run %s (401)", cfg.sessionID)
	case errors.Is(err, client.ErrRateLimited):
		return fail("the control plane is rate-limiting run %s and still was after retrying: %v", cfg.sessionID, err)
	case isForbidden(err):
		return fail("the control plane refused FLUIDBOX_SESSION_TOKEN for run %s: %v", cfg.sessionID, err)
	case err != nil:
		return fail("%v", err)
	}
	switch ans.Decision {
	case vocab.Allow:
		reason := "fluidbox allowed" + provenance(ans)
		if ans.ApprovalID != "" {
			reason += ": a human approved it (" + ans.ApprovalID + ")"
		}
		if u := bytes.TrimSpace(ans.UpdatedInput); len(u) > 0 && !bytes.Equal(u, []byte("null")) {
			// The allow holds only with the narrowed input: if it is not
			// an object Claude Code can run, the call does not run.
			var obj map[string]any
			if json.Unmarshal(u, &obj) != nil || obj == nil {
				return fail("the control plane allowed this call with an updated input that is not a JSON object")
			}
			d := allow(reason + "; fluidbox narrowed the call's input: " + ans.Reason)
			d.UpdatedInput = json.RawMessage(u)
			return d
		}
		return allow(reason)
	case vocab.Deny:
		reason := "fluidbox denied" + provenance(ans)
		if ans.Reason != "" {
			reason += ": " + ans.Reason
		}
		return deny(reason)
	case vocab.Pending:
		return fail("no human decided on approval %s within %s (FLUIDBOX_HOOK_TIMEOUT_SECONDS); ask again later or ask the operator to approve it", ans.ApprovalID, cfg.timeout)
	}
	return fail("the control plane answered an unknown decision %q", clean(string(ans.Decision), 40))
}

// globReport walks the directory a Glob searches (its path, else cwd), as
// package tree does: bounded by tree.MaxEntries names, tree.MaxBytes of
// them and tree.MaxTime, never following a link below the directory. The
// gate denies a Glob whose tree may hold a denied path unless this shows
// that none exists. nil when there is no directory to walk.
func globReport(ctx context.Context, input json.RawMessage, cwd string) *tree.Report {
	var fields map[string]any
	if json.Unmarshal(input, &fields) != nil {
		return nil
	}
	dir := ""
	if raw, ok := fields["path"]; ok {
		if dir, ok = raw.(string); !ok {
			return nil
		}
	}
	root := tree.Root(dir, cwd)
	if root == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, tree.MaxTime)
	defer cancel()
	rep := tree.Walk(ctx, root)
	return &rep
}

// isForbidden reports a 403: the token is not good for this run's route.
func isForbidden(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == 403
}

// pathFields are the input fields of Claude Code's file tools that name
// one path (the pattern fields Glob.pattern and Grep.glob are globs the
// gate judges as given).
var pathFields = []string{"file_path", "notebook_path", "path"}

// inputPaths returns the input's path fields (pathFields) that hold a
// path, each made absolute against cwd; a relative one is left out when
// there is no cwd.
func inputPaths(input json.RawMessage, cwd string) map[string]string {
	var fields map[string]any
	if json.Unmarshal(input, &fields) != nil {
		return nil
	}
	out := map[string]string{}
	for _, f := range pathFields {
		p, ok := fields[f].(string)
		if !ok || p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			if cwd == "" {
				continue
			}
			p = filepath.Join(cwd, p)
		}
		out[f] = p
	}
	return out
}

// resolvePaths returns, for each path field of the input, the path with
// every symbolic link resolved (realpath) in the sandbox. A path that does
// not exist yet (a Write's new file) resolves through its deepest existing
// parent. Relative paths resolve against cwd. Fields that cannot be
// resolved are left out; the given path is still judged.
func resolvePaths(input json.RawMessage, cwd string) map[string]string {
	var out map[string]string
	for f, p := range inputPaths(input, cwd) {
		r, ok := realpath(filepath.Clean(p))
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[f] = r
	}
	return out
}

// maxOperandLinks is how many of a Bash line's path operands that are
// symbolic links the hook reports; the request holds at most 8 resolved
// paths in all.
const maxOperandLinks = 8

// resolveOperands returns, for each path operand of a Bash line (as the
// policy's analysis numbers them) whose path goes through a symbolic link,
// the path it resolves to, keyed by policy.OperandField: cat notes.txt,
// where a pull request committed notes.txt -> .env, is then judged as a
// read of .env. Operands that are patterns or partly expansions cannot be
// resolved here and are judged as written. A line with more such links
// than a request can carry is refused rather than sent half resolved.
func resolveOperands(input json.RawMessage, cwd string) (map[string]string, error) {
	var fields struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(input, &fields) != nil || fields.Command == "" || cwd == "" {
		return nil, nil
	}
	// A link above the working directory is not the operand's: compare
	// against the path through the resolved working directory.
	base, ok := realpath(cwd)
	if !ok {
		base = cwd
	}
	var out map[string]string
	for _, op := range bash.Analyze(fields.Command).Reads() {
		if op.Index == 0 || op.Pattern || op.Partial || op.Text == "" || strings.HasPrefix(op.Text, "~") {
			continue
		}
		p := op.Text
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		p = filepath.Clean(p)
		r, ok := realpath(p)
		if !ok || r == p {
			continue
		}
		if len(out) == maxOperandLinks {
			return nil, fmt.Errorf("the command names more than %d paths through symbolic links, more than the hook can report to be judged", maxOperandLinks)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[policy.OperandField(op)] = r
	}
	return out, nil
}

// realpath resolves symbolic links in an absolute path, through the
// deepest existing ancestor when the path itself does not exist. A link
// whose target does not exist yet is followed too: a Write through
// notes.txt -> .git/hooks/pre-commit creates the hook, so that is the
// path judged.
func realpath(p string) (string, bool) {
	for hops := 0; hops < maxLinkHops; hops++ {
		rest := ""
		next := ""
		for dir := p; ; dir = filepath.Dir(dir) {
			r, err := filepath.EvalSymlinks(dir)
			if err == nil {
				return filepath.Join(r, rest), true
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", false
			}
			if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				// A dangling link: go on from where it points.
				target, rerr := os.Readlink(dir)
				if rerr != nil {
					return "", false
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(dir), target)
				}
				next = filepath.Join(target, rest)
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return "", false
			}
			rest = filepath.Join(filepath.Base(dir), rest)
		}
		p = filepath.Clean(next)
	}
	return "", false // a loop of links: unresolvable, judged as given
}

// maxLinkHops bounds the dangling links realpath follows (Linux's own
// limit is 40).
const maxLinkHops = 40

// pathKinds returns, for each path field of the input, what the sandbox
// finds there without following a final link (lstat): "file", "dir" or
// "absent"; a link is reported as what it points to (absent when that
// does not exist), and anything else (a device, a socket, a link that
// cannot be read) is left out, which the gate reads as unknown.
func pathKinds(input json.RawMessage, cwd string) map[string]string {
	var out map[string]string
	for f, p := range inputPaths(input, cwd) {
		kind := ""
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			kind = "absent"
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			st, err := os.Stat(p)
			switch {
			case err == nil:
				kind = kindOf(st.Mode())
			case errors.Is(err, fs.ErrNotExist):
				kind = "absent" // a link to nothing yet
			}
		default:
			kind = kindOf(fi.Mode())
		}
		if kind == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[f] = kind
	}
	return out
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	}
	return ""
}

// provenance is " (source, rule id)" for a reason, or "".
func provenance(ans client.Answer) string {
	var parts []string
	if ans.Source != "" {
		parts = append(parts, ans.Source)
	}
	if ans.RuleID != "" {
		parts = append(parts, "rule "+ans.RuleID)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// readHookInput reads and checks the PreToolUse JSON, bounded in size.
func readHookInput(stdin io.Reader) (preToolUse, error) {
	var in preToolUse
	if stdin == nil {
		return in, errors.New("no hook input on stdin")
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return in, fmt.Errorf("reading the hook input: %v", err)
	}
	if len(b) > maxHookInput {
		return in, fmt.Errorf("the hook input is over %d bytes", maxHookInput)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return in, errors.New("the hook input on stdin is empty")
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, errors.New("the hook input on stdin is not a PreToolUse JSON object")
	}
	var missing []string
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return in, fmt.Errorf("the hook is configured for %s; fluidbox answers PreToolUse only", clean(in.HookEventName, 40))
	}
	if in.ToolName == "" {
		missing = append(missing, "tool_name")
	}
	if in.ToolUseID == "" {
		missing = append(missing, "tool_use_id")
	}
	if len(missing) > 0 {
		return in, fmt.Errorf("the hook input has no %s", strings.Join(missing, " or "))
	}
	if t := bytes.TrimSpace(in.ToolInput); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		in.ToolInput = json.RawMessage("{}")
	}
	return in, nil
}
