package modelproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The proof of asking. The gate decides what it is asked; whether it was
// asked depends on the runner (a hook left out of the settings, an SDK app
// wired with canUseTool alone, a runner that asks about one input and runs
// another). Every model request of a run comes through this proxy, and
// with it the model's tool_use blocks and the runner's tool_result blocks,
// so the proxy checks that each tool result the model is about to read
// answers a call the gate allowed with the input the model asked for:
//
//   - A tool_result answers a tool_use of the assistant turn before it
//     (the API's own rule; consecutive messages of one role are one turn).
//     One that does not, a tool_use id used twice, or an id outside the
//     API's alphabet is refused as malformed: the upstream would refuse
//     it, and the check could not say what it answers.
//   - Passes: the run has an allowed call record for the tool_use id,
//     for the same tool, whose input digest is the digest of the tool_use
//     input, computed as the gate computes it (decoded with UseNumber and
//     re-encoded by encoding/json, so key order and string escapes do not
//     matter). Numbers are compared as spelled, or, failing that, with
//     each number spelled as JSON.stringify spells it where that spelling
//     denotes exactly the same decimal (1.0 and 1e2 are 1 and 100; an
//     integer past 2^53 is never rounded to match).
//   - Passes, with its content replaced by fluidbox's text: a result
//     marked is_error for a call the gate did not allow (denied, pending,
//     asked with another input, or never asked: the runner reporting a
//     refusal, a schema error, an interruption). The text names the gate's
//     reason. A refused call's "error" could otherwise carry what a tool
//     run unasked printed (Bash reports a failing command's output as an
//     error), so nothing a call the gate did not allow produced reaches
//     the model, in this request or any later one.
//   - Anything else is a violation: unasked, input_mismatch or
//     denied_result. With the run's verify "halt" (the default) the
//     request is refused (403, nothing forwarded) and the run ends at once
//     with run.halted, so its session token gets nothing afterwards; with
//     "record" the finding is recorded once (tool.unverified) and the
//     request goes on.
//
// Server tools (server_tool_use and their results) are the proxy's own,
// judged when offered, and are not checked here. What has been checked is
// remembered per process (bounded), keyed by run, tool_use id and a hash
// of the tool and input as sent, so a conversation's history is read once:
// a request costs one batched read of the call records its new results
// answer, and none when it answers nothing new. A process that has not
// seen the run (another instance, a restart) checks the history again and
// comes to the same answer; context compaction, which drops or rewrites
// old turns and clears old results' content, changes neither.

// Verifier checks the tool results of a run's model requests.
type Verifier struct {
	st     *store.Store
	led    *ledger.Ledger
	runs   *run.Service
	halted func(context.Context, store.Halted)
	log    *slog.Logger
	now    func() time.Time
	seen   *checked
}

// NewVerifier returns a verifier over led. halted, when set, is told of
// each run this process halted, after the commit (the dev server's
// notifications; in AWS the table's stream carries run.halted instead).
func NewVerifier(led *ledger.Ledger, runs *run.Service, halted func(context.Context, store.Halted), log *slog.Logger, now func() time.Time) *Verifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Verifier{st: led.Store(), led: led, runs: runs, halted: halted, log: log, now: now, seen: newChecked(maxChecked)}
}

// maxChecked bounds the results a process remembers as checked (some
// 100 bytes each, a few hundred with a replacement's text).
const maxChecked = 1 << 15

// maxFresh bounds the results one request may ask the proxy to check
// anew: up to 41 batched reads. A conversation's whole history fits (a
// context window holds fewer tool calls), and a request of fabricated
// pairs cannot make the table do unbounded work for one request.
const maxFresh = 4096

// toolUse is a tool_use block of an assistant message.
type toolUse struct {
	msg      int
	id, name string
	input    []byte // as sent: a slice of the body
}

// toolResult is a tool_result block of a user message.
type toolResult struct {
	msg     int
	id      string
	isError bool
	content span // absent when the block has no content
}

// maxToolIDLen bounds a tool_use id, as the gate bounds a tool_call_id.
const maxToolIDLen = 256

// validToolID reports whether id is in the API's alphabet for tool_use ids
// (letters, digits, _ and -) and holds no fluidbox credential: such an id
// is safe to record in the ledger (run.halted names it), and cannot break
// out of a log line or a key.
func validToolID(id string) bool {
	if id == "" || len(id) > maxToolIDLen || auth.HoldsCredential(id) {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (in *Inspection) readToolUse(b obj, at path) *Refusal {
	id, ok := str(in.body, b.val("id"))
	if !ok || !validToolID(id) {
		return refuse(ReasonMalformed, "%s.id: must be a tool_use id (1 to %d letters, digits, _ and -)", at, maxToolIDLen)
	}
	name, ok := str(in.body, b.val("name"))
	if !ok || name == "" {
		return refuse(ReasonMalformed, "%s.name: must be a string", at)
	}
	input := b.val("input")
	if kind(in.body, input) != '{' {
		return refuse(ReasonMalformed, "%s.input: must be an object", at)
	}
	if in.roles[in.msg] != "assistant" {
		return refuse(ReasonMalformed, "%s: a tool_use block belongs in an assistant message", at)
	}
	in.uses = append(in.uses, toolUse{msg: in.msg, id: id, name: name, input: in.body[input.s:input.e]})
	return nil
}

func (in *Inspection) readToolResult(b obj, at path) *Refusal {
	id, ok := str(in.body, b.val("tool_use_id"))
	if !ok || !validToolID(id) {
		return refuse(ReasonMalformed, "%s.tool_use_id: must be a tool_use id (1 to %d letters, digits, _ and -)", at, maxToolIDLen)
	}
	isError := false
	if v, present := b.get("is_error"); present && kind(in.body, v) != 'n' {
		if isError, ok = boolean(in.body, v); !ok {
			return refuse(ReasonMalformed, "%s.is_error: must be a boolean", at)
		}
	}
	if in.roles[in.msg] != "user" {
		return refuse(ReasonMalformed, "%s: a tool_result block belongs in a user message", at)
	}
	in.results = append(in.results, toolResult{msg: in.msg, id: id, isError: isError, content: b.val("content")})
	return nil
}

// answered is a tool result and the tool_use it answers.
type answered struct {
	use toolUse
	res toolResult
	sum [sha256.Size]byte // the tool and input as sent, for the cache
}

// pairs matches each tool result with the tool_use it answers: one of the
// nearest assistant turn before the result's user turn. System messages
// (text only) belong to no turn.
func (in *Inspection) pairs() ([]answered, *Refusal) {
	if len(in.results) == 0 {
		return nil, nil
	}
	// turn[i] numbers message i's turn: consecutive messages of one role
	// are one turn, as the API reads them.
	turn := make([]int, len(in.roles))
	n, last := 0, ""
	for i, r := range in.roles {
		if r == "system" {
			turn[i] = -1
			continue
		}
		if r != last {
			n, last = n+1, r
		}
		turn[i] = n
	}
	uses := make(map[string]toolUse, len(in.uses))
	for _, u := range in.uses {
		if _, dup := uses[u.id]; dup {
			return nil, refuse(ReasonMalformed, "messages: tool_use id %s is used twice; each tool_use needs its own id", u.id)
		}
		uses[u.id] = u
	}
	out := make([]answered, 0, len(in.results))
	done := make(map[string]bool, len(in.results))
	for _, r := range in.results {
		u, ok := uses[r.id]
		// The user turn's number is one past the assistant turn before it.
		if !ok || turn[u.msg] != turn[r.msg]-1 {
			return nil, refuse(ReasonMalformed, "messages[%d]: the tool_result for %s answers no tool_use of the assistant turn before it", r.msg, r.id)
		}
		if done[r.id] {
			return nil, refuse(ReasonMalformed, "messages[%d]: tool_use %s is answered twice", r.msg, r.id)
		}
		done[r.id] = true
		h := sha256.New()
		h.Write([]byte(u.name))
		h.Write([]byte{0})
		h.Write(u.input)
		a := answered{use: u, res: r}
		h.Sum(a.sum[:0])
		out = append(out, a)
	}
	return out, nil
}

// inputDigests returns the digest of a tool input as the gate computes it
// (permission's checkRequest: decoded with UseNumber, re-encoded by
// encoding/json, which sorts keys and escapes strings one way), and, when
// some number is spelled otherwise than JSON.stringify spells the same
// decimal, the digest with those numbers so spelled ("" when none is).
func inputDigests(raw []byte) (gate, stringified string, err error) {
	dec := stdjson.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", "", err
	}
	d, err := redact.DigestJSON(v)
	if err != nil {
		return "", "", err
	}
	if !respell(&v) {
		return d.String(), "", nil
	}
	alt, err := redact.DigestJSON(v)
	if err != nil {
		return "", "", err
	}
	return d.String(), alt.String(), nil
}

// respell rewrites, in place, each number of v into the spelling
// JSON.stringify gives it (what a JavaScript runner such as Claude Code
// sends the gate), where that spelling denotes exactly the same decimal,
// and reports whether any changed. A number that a float64 cannot hold,
// rounds, or that is spelled in more than maxNumberLen bytes keeps its
// spelling: comparing it rounded could match an input the gate never saw.
func respell(v *any) bool {
	switch x := (*v).(type) {
	case map[string]any:
		changed := false
		for k, e := range x {
			if respell(&e) {
				x[k], changed = e, true
			}
		}
		return changed
	case []any:
		changed := false
		for i := range x {
			changed = respell(&x[i]) || changed
		}
		return changed
	case stdjson.Number:
		if s, ok := stringified(string(x)); ok && s != string(x) {
			*v = stdjson.Number(s)
			return true
		}
	}
	return false
}

// maxNumberLen bounds the spelling respell reads exactly: a longer one is
// compared as spelled (and costs nothing to refuse to normalize).
const maxNumberLen = 64

// stringified returns JSON.stringify's spelling of the number n (valid
// JSON), if it denotes exactly n's decimal.
func stringified(n string) (string, bool) {
	if len(n) > maxNumberLen {
		return "", false
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		f = 0 // JSON.stringify(-0) is "0"; encoding/json would write "-0"
	}
	b, err := stdjson.Marshal(f) // otherwise encoding/json spells float64 as ECMAScript does
	if err != nil {
		return "", false
	}
	// Both are at most maxNumberLen bytes with exponents a float64 can
	// reach (ParseFloat refused the rest), so these are small rationals.
	var a, c big.Rat
	if _, ok := a.SetString(n); !ok {
		return "", false
	}
	if _, ok := c.SetString(string(b)); !ok || a.Cmp(&c) != 0 {
		return "", false
	}
	return string(b), true
}

// outcome of one checked result.
type finding int

const (
	passed   finding = iota + 1 // allowed with this input: forwarded as sent
	replaced                    // an error for a call not allowed: content replaced
	recorded                    // a violation in a run that only records
)

// remembered is what the process knows of a checked result.
type remembered struct {
	sum     [sha256.Size]byte
	finding finding
	text    []byte // the replacement content (a JSON string), for replaced
}

// checked is a bounded memory of checked results: two generations, the
// older dropped when the newer fills, so what a live conversation keeps
// using stays while what no request carries ages out.
type checked struct {
	mu       sync.Mutex
	cur, old map[string]remembered
	max      int
}

func newChecked(max int) *checked {
	return &checked{cur: map[string]remembered{}, old: map[string]remembered{}, max: max}
}

func checkedKey(runID, id string) string { return runID + "\x00" + id }

func (c *checked) get(k string) (remembered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.cur[k]; ok {
		return r, true
	}
	r, ok := c.old[k]
	if ok {
		c.putLocked(k, r)
	}
	return r, ok
}

func (c *checked) put(k string, r remembered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, r)
}

func (c *checked) putLocked(k string, r remembered) {
	if len(c.cur) >= c.max/2 {
		c.old, c.cur = c.cur, make(map[string]remembered, c.max/2)
	}
	c.cur[k] = r
}

// violation is a result that fails the check.
type violation struct {
	a      answered
	reason redact.Violation
}

// Check checks the tool results of one request of runID. It returns nil
// when the request may go on (with the contents of results for calls the
// gate did not allow replaced, as edits of in), or the refusal to answer.
func (v *Verifier) Check(ctx context.Context, runID string, in *Inspection) *Refusal {
	pairs, ref := in.pairs()
	if ref != nil || len(pairs) == 0 {
		return ref
	}
	fresh := v.unchecked(runID, in, pairs)
	if len(fresh) == 0 {
		return nil
	}
	if len(fresh) > maxFresh {
		return &Refusal{Status: http.StatusRequestEntityTooLarge, Type: "request_too_large", Reason: ReasonTooLarge,
			Message: fmt.Sprintf("fluidbox: this request carries %d tool results not checked before, more than the %d fluidbox's model proxy checks at once; send less", len(fresh), maxFresh)}
	}
	ids := make([]string, len(fresh))
	for i, a := range fresh {
		ids[i] = a.use.id
	}
	calls, err := v.st.Calls(ctx, runID, ids)
	if err != nil {
		v.log.ErrorContext(ctx, "model proxy: read calls to check tool results", "run", runID, "err", err)
		return cannotCheck()
	}
	var bad []violation
	var schemas map[string]string // the run's frozen tool schemas, read once if needed
	for _, a := range fresh {
		c, asked := calls[a.use.id]
		f, reason, text, ref := v.judgeAsRan(ctx, runID, a, c, asked, &schemas)
		if ref != nil {
			return ref
		}
		switch f {
		case passed:
			v.seen.put(checkedKey(runID, a.use.id), remembered{sum: a.sum, finding: passed})
		case replaced:
			in.replace(a.res, text)
			v.seen.put(checkedKey(runID, a.use.id), remembered{sum: a.sum, finding: replaced, text: text})
		default:
			bad = append(bad, violation{a, reason})
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return v.violated(ctx, runID, bad)
}

// unchecked returns the results of pairs not checked before with the same
// contents, and puts back the replacement of those replaced before.
func (v *Verifier) unchecked(runID string, in *Inspection, pairs []answered) []answered {
	var fresh []answered
	for _, a := range pairs {
		r, ok := v.seen.get(checkedKey(runID, a.use.id))
		if !ok || r.sum != a.sum || (r.finding == replaced && !a.res.isError) {
			fresh = append(fresh, a)
			continue
		}
		if r.finding == replaced {
			in.replace(a.res, r.text)
		}
	}
	return fresh
}

// judgeAsRan judges one result against its call; a call that does not
// pass is judged again with its schema's defaults filled in. schemas is
// read once per request, when first needed. ref is the refusal when the
// input cannot be read or the schemas cannot be.
func (v *Verifier) judgeAsRan(ctx context.Context, runID string, a answered, c store.Call, asked bool, schemas *map[string]string) (f finding, reason redact.Violation, text []byte, ref *Refusal) {
	f, reason, text, err := judge(a, c, asked)
	if err != nil {
		return f, reason, text, refuse(ReasonMalformed, "messages[%d]: the input of tool_use %s could not be read", a.use.msg, a.use.id)
	}
	if f == passed || !asked || c.Decision != vocab.Allow || c.ToolName != a.use.name {
		return f, reason, text, nil
	}
	// The runner may have filled in the schema's defaults before
	// asking (Claude Code does): compare again as it ran the call.
	if *schemas == nil {
		if *schemas, err = v.frozenSchemas(ctx, runID); err != nil {
			v.log.ErrorContext(ctx, "model proxy: read frozen tools to check tool results", "run", runID, "err", err)
			return f, reason, text, cannotCheck()
		}
	}
	filled, ok := withDefaults(a.use.input, (*schemas)[a.use.name])
	if !ok {
		return f, reason, text, nil
	}
	b := a
	b.use.input = filled
	if f, reason, text, err = judge(b, c, asked); err != nil {
		return f, reason, text, refuse(ReasonMalformed, "messages[%d]: the input of tool_use %s could not be read", a.use.msg, a.use.id)
	}
	return f, reason, text, nil
}

// cannotCheck is the refusal when the store cannot be read to check.
func cannotCheck() *Refusal {
	return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable,
		Message: "fluidbox cannot check this request's tool results right now; nothing was forwarded"}
}

// frozenSchemas returns the input schema of each tool frozen for runID.
func (v *Verifier) frozenSchemas(ctx context.Context, runID string) (map[string]string, error) {
	fr, err := v.st.GetFrozen(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(fr.Tools))
	for _, t := range fr.Tools {
		out[t.Name] = t.Schema
	}
	return out, nil
}

// withDefaults returns input (a JSON object) with each top-level property
// it leaves out that schema (the run's frozen schema of the tool) gives a
// default set to that default, and whether it added any. This is what a
// runner that applies the schema's defaults before asking the gate ran,
// so the gate allowed exactly the call the model asked for. Only absent
// top-level properties are filled, only with the frozen schema's own
// values (never the CLI's schema), so no input the gate did not see can
// match; nested defaults are not applied.
func withDefaults(input []byte, schema string) ([]byte, bool) {
	var s struct {
		Properties map[string]stdjson.RawMessage `json:"properties"`
	}
	if stdjson.Unmarshal([]byte(schema), &s) != nil || len(s.Properties) == 0 {
		return nil, false
	}
	var in map[string]stdjson.RawMessage
	if stdjson.Unmarshal(input, &in) != nil || in == nil {
		return nil, false
	}
	added := false
	for name, raw := range s.Properties {
		if _, present := in[name]; present {
			continue
		}
		var p struct {
			Default stdjson.RawMessage `json:"default"`
		}
		if stdjson.Unmarshal(raw, &p) != nil || p.Default == nil {
			continue
		}
		in[name], added = p.Default, true
	}
	if !added {
		return nil, false
	}
	out, err := stdjson.Marshal(in)
	if err != nil {
		return nil, false
	}
	return out, true
}

// judge decides one result against its call record.
func judge(a answered, c store.Call, asked bool) (f finding, reason redact.Violation, text []byte, err error) {
	if !asked {
		if a.res.isError {
			return replaced, "", replacement("fluidbox denied this call: the gate has no record of it (the runner did not ask, or could not reach fluidbox), so its output is withheld. If the tool refused its input, correct the input and call it again."), nil
		}
		return 0, redact.ViolationUnasked, nil, nil
	}
	if c.Decision == vocab.Allow {
		gate, alt, err := inputDigests(a.use.input)
		if err != nil {
			return 0, "", nil, err
		}
		if c.ToolName == a.use.name && (c.InputDigest == gate || (alt != "" && c.InputDigest == alt)) {
			return passed, "", nil, nil
		}
		if a.res.isError {
			return replaced, "", replacement("fluidbox denied this call: the gate allowed this tool call id with another tool or input than this tool_use, so its output is withheld."), nil
		}
		return 0, redact.ViolationInputMismatch, nil, nil
	}
	if a.res.isError {
		return replaced, "", replacement(refusedText(c)), nil
	}
	return 0, redact.ViolationDeniedResult, nil, nil
}

// refusedText is what the model reads for a call the gate did not allow,
// in the words the hook gives the model ("fluidbox denied (source, rule
// id): reason", "fluidbox denied this call: ..."), so a runner's own
// refusal and fluidbox's replacement read alike.
func refusedText(c store.Call) string {
	if c.Decision == vocab.Pending {
		return "fluidbox denied this call: no human has decided on its approval (" + c.ApprovalID + ") yet, so its output is withheld."
	}
	var parts []string
	if c.Source != "" {
		parts = append(parts, c.Source)
	}
	if c.RuleID != "" {
		parts = append(parts, "rule "+c.RuleID)
	}
	text := "fluidbox denied"
	if len(parts) > 0 {
		text += " (" + strings.Join(parts, ", ") + ")"
	}
	if c.Reason != "" {
		text += ": " + c.Reason
	}
	return text
}

// replacement is text as a tool_result's content.
func replacement(text string) []byte {
	b, _ := stdjson.Marshal(text) // a string always encodes
	return b
}

// replace makes the forwarded body carry text as r's content.
func (in *Inspection) replace(r toolResult, text []byte) {
	if r.content.e > r.content.s {
		in.edits = append(in.edits, edit{r.content, text})
	}
}

// violated answers the request's violations: the first, in the order of
// the request, halts the run (or, in a run that only records, each is
// recorded once and the request goes on).
func (v *Verifier) violated(ctx context.Context, runID string, bad []violation) *Refusal {
	h, err := v.led.Head(ctx, runID)
	if err != nil {
		v.log.ErrorContext(ctx, "model proxy: read run to answer a violation", "run", runID, "err", err)
		return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable,
			Message: "fluidbox cannot check this request's tool results right now; nothing was forwarded"}
	}
	if run.VerifyOf(h) == run.VerifyRecord {
		for _, b := range bad {
			if err := v.record(ctx, runID, b); err != nil {
				v.log.ErrorContext(ctx, "model proxy: record an unverified tool result", "run", runID, "tool_call", b.a.use.id, "err", err)
				return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable,
					Message: "fluidbox cannot record this request's tool results right now; nothing was forwarded"}
			}
			v.seen.put(checkedKey(runID, b.a.use.id), remembered{sum: b.a.sum, finding: recorded})
			v.log.WarnContext(ctx, "model proxy: tool result not allowed by the gate, recorded (verify record)", "run", runID, "tool_call", b.a.use.id, "reason", b.reason)
		}
		return nil
	}
	first := bad[0]
	halted, err := v.runs.Halt(ctx, runID, first.a.use.id, first.reason)
	if err != nil {
		v.log.ErrorContext(ctx, "model proxy: halt run", "run", runID, "err", err)
		return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable,
			Message: "fluidbox cannot check this request's tool results right now; nothing was forwarded"}
	}
	if halted {
		v.log.WarnContext(ctx, "model proxy: run halted", "run", runID, "tool_call", first.a.use.id, "reason", first.reason)
		if v.halted != nil {
			v.halted(ctx, store.Halted{RunID: runID, ToolCallID: first.a.use.id, Reason: string(first.reason), At: store.FormatTime(v.now())})
		}
	}
	return &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonRun,
		Message: fmt.Sprintf("fluidbox halted this run: the tool result for %s answers a call the gate did not allow with that input (%s: %s); nothing was forwarded, and this run's session token is refused from now on",
			first.a.use.id, first.reason, explain(first.reason))}
}

func explain(r redact.Violation) string {
	switch r {
	case redact.ViolationUnasked:
		return "the gate was never asked about it"
	case redact.ViolationInputMismatch:
		return "the gate allowed that call id with another tool or input"
	default:
		return "the gate did not allow it, and its result is not an error"
	}
}

// errRecordedBefore: the finding is in the ledger already.
var errRecordedBefore = errors.New("modelproxy: finding recorded before")

// record appends tool.unverified for a violation, once per tool call.
func (v *Verifier) record(ctx context.Context, runID string, b violation) error {
	ev, err := redact.New(redact.ToolUnverified{ToolCallID: b.a.use.id, Reason: b.reason})
	if err != nil {
		return err
	}
	op, err := v.st.PutNew(store.UnverifiedKey(runID, b.a.use.id),
		store.Unverified{ToolCallID: b.a.use.id, Reason: string(b.reason), At: store.FormatTime(v.now())}, errRecordedBefore)
	if err != nil {
		return err
	}
	_, err = v.led.Append(ctx, runID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{op}}, nil
	})
	if errors.Is(err, errRecordedBefore) {
		return nil
	}
	return err
}
