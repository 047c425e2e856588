// Package modelproxy is the model-access inversion: a sandbox's API key is
// its run's session token, and fluidbox forwards its Anthropic Messages API
// requests upstream with the operator's key, which never enters the
// sandbox.
//
// What it guarantees:
//   - Nothing is forwarded that the proxy did not fully understand. The
//     request is read by a strict inspector (inspect.go): top-level
//     members, message members, content block types, image and document
//     sources, tool types and their members, and anthropic-beta values are
//     allowlists; duplicate member names are refused; mcp_servers,
//     mcp_toolset, container and file_id are refused by name. A refusal is
//     a 4xx in Anthropic's error shape that says what to change, and a
//     model.refused event in the run's ledger; nothing reaches the upstream.
//   - The model channel is a tool channel. Every server tool a request
//     offers (web_search, web_fetch, code_execution) and every URL-sourced
//     image or document is judged by the gate as a call of the
//     anthropic-server-tools bundle: frozen tool set, schema, trust tier,
//     policy, in the gate's own order. Anything but allow is refused; a
//     read_only run can offer none of them.
//   - The runner asked. Every tool result a request carries must answer a
//     call the gate allowed with the input the model asked for, or be an
//     error whose content fluidbox replaces; anything else halts the run
//     (verify.go).
//   - The reservation is a genuine upper bound: max_tokens at the output
//     rate; an input bound taken from the body's bytes, or from the model's
//     context window for each sampling step when server tools or documents
//     bring in content the bytes do not bound; at the highest input or
//     cache-write rate; plus every web search max_uses allows at its fee.
//     Server tools without max_uses (web fetch without max_content_tokens)
//     get one imposed in the forwarded request. What the price table cannot
//     price (code execution, fast mode, a service tier other than
//     standard_only, US-only inference where no multiplier is known) is
//     refused, and a request naming no service tier gets standard_only
//     imposed (the API's default may use Priority Tier capacity). When max_tokens does not fit the
//     budget, it is lowered to what does (never below MinMaxTokens); below
//     that the answer is a 402 with the amounts needed and available.
//   - One meter. Reservations booked here are settled only by this proxy
//     and the sweep; the usage endpoint refuses them. The usage comes from
//     the upstream's own response: a stream is followed without a line cap
//     on the usage path; a response naming another model than the admitted
//     one is cut and settled in full, one naming none is settled in full;
//     no usage settles in full; an upstream
//     error answer or a refused connection releases. A settlement that
//     fails is retried, inline and then in the background, before the
//     sweep settles it in full.
//   - The operator's credential is opened per request, in this process
//     only, and set on the upstream request alone; the session token is
//     never forwarded, and only allow-listed headers cross in either
//     direction (never the upstream's anthropic-* family: the operator's
//     organization id and organization-wide rate limits).
//   - Prompts and completions pass through and are kept nowhere: the ledger
//     holds ids, server-tool names and counts, token counts and cost.
package modelproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/bits"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// Bounds of one proxied request.
const (
	// MaxBody is the largest request body accepted, Anthropic's own limit
	// for the Messages API.
	MaxBody = 32 << 20
	// maxResponse bounds a non-streaming response held in memory.
	maxResponse = 64 << 20
	// maxErrorBody bounds an upstream error answer passed back.
	maxErrorBody = 1 << 20
	// settleTimeout bounds the settlement written after the client left.
	settleTimeout = 15 * time.Second
	// defaultVersion is sent when the client named no anthropic-version.
	defaultVersion = "2023-06-01"
	// MinMaxTokens is the floor below which the proxy does not lower a
	// request's max_tokens to fit a budget: a reply shorter than that is
	// rarely worth its input, so the run is told it is out of money instead.
	MinMaxTokens = 1024
	// promptOverhead covers the tokens the API adds to a request itself
	// (the tool-use system prompt, server tools' instructions), which its
	// bytes do not show.
	promptOverhead = 8192
)

// Judge is the gate as the proxy asks it about the server tools of one
// request (permission.Service.JudgeModelTools).
type Judge interface {
	JudgeModelTools(ctx context.Context, runID string, calls []gate.Request) ([]gate.Decision, error)
}

// Proxy forwards Messages API requests of runs to the model upstream.
type Proxy struct {
	admit     *admission.Service
	upstreams *Upstreams
	judge     Judge
	verify    *Verifier
	client    *http.Client
	log       *slog.Logger
	tel       *telemetry.Telemetry
}

// Record sends each settled request's span, tokens and money to t.
func (p *Proxy) Record(t *telemetry.Telemetry) { p.tel = t }

// New returns a proxy. verify checks each request's tool results (the
// proof of asking, verify.go); it is required. client may be nil for a
// default without an overall timeout (a stream lasts as long as the model
// writes) but with bounded connection setup.
func New(admit *admission.Service, upstreams *Upstreams, judge Judge, verify *Verifier, client *http.Client, log *slog.Logger) *Proxy {
	if client == nil {
		// No proxy: the guard judges the upstream's own address, after
		// resolution, at every dial.
		client = &http.Client{Transport: &http.Transport{
			DialContext:           upstreams.guard.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 10 * time.Minute,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Never follow a redirect: it would carry the operator's key elsewhere.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Proxy{admit: admit, upstreams: upstreams, judge: judge, verify: verify, client: &c, log: log}
}

// plan is an inspected request, judged and priced, ready to admit.
type plan struct {
	in          *Inspection
	model       budget.Model
	price       budget.Price
	input       int64 // the input token bound
	webSearches int64
	requested   int64 // max_tokens as the client sent it, when lowered
}

// ServeMessages proxies one POST .../v1/messages of runID, whose caller the
// API layer has already authenticated with that run's session token.
func (p *Proxy) ServeMessages(w http.ResponseWriter, r *http.Request, runID string) {
	ctx := r.Context()
	start := p.upstreams.now()
	requestID := ids.New("req_")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		p.refuse(ctx, w, runID, requestID, "", &Refusal{Status: http.StatusRequestEntityTooLarge, Type: "request_too_large", Reason: ReasonTooLarge,
			Message: "fluidbox: the request body is over 32 MiB, the Messages API's own limit; send less"})
		return
	case err != nil:
		p.refuse(ctx, w, runID, requestID, "", refuse(ReasonMalformed, "the request body could not be read"))
		return
	}
	in, ref := Inspect(body, r.Header, r.URL.RawQuery)
	if ref != nil {
		p.refuse(ctx, w, runID, requestID, "", ref)
		return
	}
	pl, ref := p.plan(ctx, runID, in, len(body))
	if ref != nil {
		p.refuse(ctx, w, runID, requestID, in.Model, ref)
		return
	}
	// After plan, which refuses an ended run, and before anything is
	// booked or sent: a halted run's request is answered here.
	if ref := p.verify.Check(ctx, runID, in); ref != nil {
		if ref.Reason == ReasonRun {
			// A halt: run.halted is its record, not model.refused.
			WriteError(w, ref.Status, ref.Type, ref.Message)
			return
		}
		p.refuse(ctx, w, runID, requestID, in.Model, ref)
		return
	}
	fwd, err := in.Body(body)
	if err != nil {
		p.refuse(ctx, w, runID, requestID, in.Model, refuse(ReasonMalformed, "the request could not be re-encoded"))
		return
	}
	up, err := p.upstreams.Open(ctx)
	if err != nil {
		p.log.ErrorContext(ctx, "model proxy: upstream", "run", runID, "err", err)
		p.refuse(ctx, w, runID, requestID, in.Model, &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable,
			Message: "fluidbox cannot reach a model upstream right now"})
		return
	}

	res, err := p.admit.AdmitProxied(ctx, runID, admission.Proxied{
		Request: admission.Request{RequestID: requestID, Model: in.Model, MaxOutputTokens: in.MaxTokens, InputTokensUpperBound: pl.input},
		Price:   pl.price, WebSearches: pl.webSearches, ServerTools: in.Offered(), MaxTokensRequested: pl.requested,
		No1hCacheWrite: !in.Cache1h,
	})
	if err != nil {
		p.admissionFailed(ctx, w, runID, requestID, in, pl, err)
		return
	}

	out := outcome{settlement: admission.SettlementPessimistic}
	defer func() { p.settle(ctx, runID, requestID, res, pl, &out, start) }()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/v1/messages", bytes.NewReader(fwd))
	if err != nil {
		out.settlement = admission.SettlementReleased // nothing was sent
		WriteError(w, http.StatusInternalServerError, "api_error", "fluidbox could not build the upstream request")
		return
	}
	req.URL.RawQuery = r.URL.RawQuery // "" or beta=true: the inspector admits nothing else
	copyRequestHeaders(req.Header, r.Header)
	up.Credential.Apply(req.Header)

	resp, err := p.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Nothing reached the upstream, so nothing can be billed.
			out.settlement = admission.SettlementReleased
		}
		p.log.WarnContext(ctx, "model proxy: upstream request failed", "run", runID, "request", requestID, "err", err)
		WriteError(w, http.StatusBadGateway, "api_error", "the model upstream could not be reached")
		out.status = http.StatusBadGateway
		return
	}
	defer resp.Body.Close()
	out.status = resp.StatusCode

	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		// An error answer is not billed: release, and pass it on.
		copyResponseHeaders(w.Header(), resp.Header)
		out.settlement = admission.SettlementReleased
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		copyResponseHeaders(w.Header(), resp.Header)
		p.stream(w, resp.Body, pl, &out)
	default:
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		if err != nil {
			WriteError(w, http.StatusBadGateway, "api_error", "the model upstream's answer was cut short")
			return
		}
		u, model, uses, err := budget.ResponseFromBody(b)
		if model != "" && !p.sameModel(in.Model, model) {
			// Billed at a price nobody admitted: settle in full, pass nothing.
			out.status = http.StatusBadGateway
			WriteError(w, http.StatusBadGateway, "api_error", "fluidbox: the model upstream answered with a model other than the one admitted")
			return
		}
		if err == nil && model != "" {
			// Usage is priced at the admitted model's rates only when the
			// response says it is that model; unnamed, it is settled in full.
			out.settlement, out.usage, out.haveUsage, out.uses = admission.SettlementUsage, u, true, uses
		}
		copyResponseHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}
}

// plan judges the request's server tools, prices it and bounds it, lowering
// max_tokens to what the run can afford.
func (p *Proxy) plan(ctx context.Context, runID string, in *Inspection, bodyLen int) (plan, *Refusal) {
	m, err := p.admit.Prices().Model(in.Model)
	if err != nil {
		return plan{}, refuse(ReasonUnpriced, "model %s is not in fluidbox's price table; unpriced models are refused", quoteName(in.Model))
	}
	if ref := p.judgeTools(ctx, runID, in); ref != nil {
		return plan{}, ref
	}
	pl := plan{in: in, model: m, price: m.Price}
	for _, st := range in.ServerTools {
		if st.Tool == capability.ToolCodeExecution {
			return plan{}, refuse(ReasonUnpriced, "tools: code_execution is billed per container-hour, which one request cannot bound, so fluidbox cannot price it; remove the tool")
		}
	}
	if in.InferenceGeo == "us" {
		if m.USMultiplierPermille == 0 {
			return plan{}, refuse(ReasonUnpriced, `inference_geo "us" has no known price for model %s; remove inference_geo`, quoteName(in.Model))
		}
		pl.price = m.Price.Scale(m.USMultiplierPermille)
	}
	pl.input, pl.webSearches = inputBound(in, bodyLen, m.ContextWindow)

	available, ended, err := p.admit.Available(ctx, runID)
	switch {
	case errors.Is(err, admission.ErrRunNotFound):
		return plan{}, &Refusal{Status: http.StatusNotFound, Type: "not_found_error", Reason: ReasonRun, Message: "fluidbox: no such run"}
	case err != nil:
		p.log.ErrorContext(ctx, "model proxy: read budget", "run", runID, "err", err)
		return plan{}, &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable, Message: "fluidbox cannot admit model requests right now"}
	case ended:
		return plan{}, &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonRun, Message: "fluidbox: this run has ended"}
	}
	amount, err := p.reserve(pl, in.MaxTokens)
	if err != nil {
		return plan{}, refuse(ReasonMalformed, "max_tokens: the reservation would overflow")
	}
	if int64(amount) <= available {
		return pl, nil
	}
	// Lower max_tokens to what the budget affords, never below the floor
	// (nor to where extended thinking no longer fits).
	floor := max(int64(MinMaxTokens), in.ThinkingBudget+1)
	fixed, _ := p.reserve(pl, 0)
	afford := int64(0)
	if left := available - int64(fixed); left > 0 && pl.price.OutputPerMTok > 0 {
		afford = tokensFor(left, int64(pl.price.OutputPerMTok))
	}
	if afford < floor || afford >= in.MaxTokens {
		need, _ := p.reserve(pl, min(floor, in.MaxTokens))
		return plan{}, &Refusal{Status: http.StatusPaymentRequired, Type: "billing_error", Reason: ReasonBudget,
			Needed: int64(need), Available: max(available, 0),
			Message: fmt.Sprintf("fluidbox: this run's budget cannot cover this request: it needs %s (max_tokens %d, the input bound and server-tool fees) and %s is available; raise the run's budget or send less",
				need, min(floor, in.MaxTokens), budget.Micros(max(available, 0)))}
	}
	pl.requested = in.MaxTokens
	in.SetMaxTokens(afford)
	return pl, nil
}

// tokensFor is how many tokens micros buys at perMTok micro-USD per
// million, rounded down: the product is taken in 128 bits, since on a
// budget over $9.2M it does not fit in 64 and a wrapped one would lower
// max_tokens to an arbitrary fraction of what is affordable.
func tokensFor(micros, perMTok int64) int64 {
	hi, lo := bits.Mul64(uint64(micros), 1_000_000)
	if hi >= uint64(perMTok) {
		return math.MaxInt64 // the quotient does not fit in 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(perMTok))
	return int64(min(q, math.MaxInt64))
}

func (p *Proxy) reserve(pl plan, maxTokens int64) (budget.Micros, error) {
	return budget.ReserveBound(pl.price, budget.Bound{MaxOutputTokens: maxTokens, InputTokens: pl.input, WebSearches: pl.webSearches, No1hCacheWrite: !pl.in.Cache1h})
}

// maxImageTokens bounds one image's input tokens. The API scales an image
// down to the most a model reads, and bills about width x height / 750
// tokens (a 28 px patch a token, the edges padded to a patch): some 1,600
// tokens at the 1568 px long edge of models before Claude Opus 4.7, some
// 5,000 at the 2576 px and 3.75 megapixels of Opus 4.7 and later. The
// bound is the larger, with a quarter more for the estimate being
// approximate.
const maxImageTokens = 6250

// inputBound is the most input tokens the request can be billed for, and
// the most web searches it can run. Without server tools the API samples
// once and reads at most the request (a token is never shorter than a
// byte, plus the prompt the API adds, plus maxImageTokens an image, plus a
// referenced tool's definition again per tool_reference), within
// the context window; a PDF or a URL source is bounded only by the window. Each server tool use is one
// more sampling step reading the context again with the tool's result
// added, and with what the model wrote in the steps before: a web fetch
// adds at most twice its max_content_tokens (the limit is approximate), a
// web search an unbounded result, so the window.
func inputBound(in *Inspection, bodyLen int, window int64) (input, searches int64) {
	first := min(satAdd(satAdd(int64(bodyLen)+promptOverhead, satMul(in.Images, maxImageTokens)), in.ReferencedBytes), window)
	if in.Documents {
		first = window
	}
	// The client sets max_uses and max_content_tokens: sums and products
	// saturate (a bound past int64 is one no budget covers) rather than
	// wrap to a small or negative one.
	steps, growth := int64(0), int64(0)
	for _, st := range in.ServerTools {
		steps = satAdd(steps, st.MaxUses)
		switch st.Tool {
		case capability.ToolWebSearch:
			searches = satAdd(searches, st.MaxUses)
			growth = window
		case capability.ToolWebFetch:
			growth = max(growth, 2*min(st.MaxContentTokens, window))
		}
	}
	// Every step after the first reads the context again: the request,
	// what the model wrote before it (at most max_tokens in all, and read
	// by every later step) and the results so far. The results grow it by
	// growth a step until it fills the window (at most window/growth
	// steps); every step after reads what it has come to.
	input, cur := first, first
	if steps > 0 {
		cur = min(satAdd(first, in.MaxTokens), window)
	}
	for ; steps > 0 && growth > 0 && cur < window; steps-- {
		cur = min(cur+growth, window)
		input += cur
	}
	return satAdd(input, satMul(steps, cur)), searches
}

// satAdd and satMul are + and * of non-negative int64s, saturating at
// math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// judgeTools asks the gate about every server tool and URL source.
func (p *Proxy) judgeTools(ctx context.Context, runID string, in *Inspection) *Refusal {
	var calls []gate.Request
	var whats []string
	for _, st := range in.ServerTools {
		calls = append(calls, gate.Request{ToolName: st.Tool, Input: st.Input})
		whats = append(whats, "server tool "+st.Tool)
		for _, one := range eachDomain(st.Input) {
			calls = append(calls, gate.Request{ToolName: st.Tool, Input: one})
			whats = append(whats, "server tool "+st.Tool+" (one of its allowed_domains, judged on its own)")
		}
	}
	for _, u := range in.URLSources {
		calls = append(calls, gate.Request{ToolName: capability.ToolWebFetch, Input: map[string]any{"url": u}})
		whats = append(whats, "a URL source (judged as "+capability.ToolWebFetch+")")
	}
	if len(calls) == 0 {
		return nil
	}
	if p.judge == nil {
		return &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonGate, Tool: calls[0].ToolName,
			Message: "fluidbox: this proxy has no gate to judge server tools, so none is allowed"}
	}
	ds, err := p.judge.JudgeModelTools(ctx, runID, calls)
	switch {
	case errors.Is(err, run.ErrNotFound):
		return &Refusal{Status: http.StatusNotFound, Type: "not_found_error", Reason: ReasonRun, Message: "fluidbox: no such run"}
	case err != nil:
		p.log.ErrorContext(ctx, "model proxy: gate", "run", runID, "err", err)
		return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonGate, Message: "fluidbox cannot judge this request's server tools right now"}
	}
	if len(ds) != len(calls) {
		p.log.ErrorContext(ctx, "model proxy: gate answered another number of calls", "run", runID, "calls", len(calls), "decisions", len(ds))
		return &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonGate, Message: "fluidbox cannot judge this request's server tools right now"}
	}
	for i, d := range ds {
		name, what := calls[i].ToolName, whats[i]
		switch d.Outcome {
		case policy.VerdictAllow:
			continue
		case policy.VerdictRequireApproval:
			return &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonGate, Tool: name, Stage: "approval", Source: string(gate.SourcePolicy),
				Message: fmt.Sprintf("fluidbox: the policy requires approval for %s, and a model request cannot wait for a human; allow it by a policy rule or a session grant, or remove it from the request", what)}
		default:
			return &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonGate, Tool: name, Stage: d.Stage, Source: string(d.Source),
				Message: fmt.Sprintf("fluidbox denied %s (stage %s): %s; remove it from the request", what, d.Stage, d.Reason)}
		}
	}
	return nil
}

// eachDomain returns, for a server tool allowing more than one domain, its
// definition once per domain with that domain as the only one. A policy
// pins a tool's domains by pointer ("/allowed_domains/0"), which reads one
// element; judged also one domain at a time, every domain the API may reach
// meets the policy, while the whole definition is still judged as sent (a
// rule on "/allowed_domains/1" keeps matching).
func eachDomain(input any) []any {
	def, _ := input.(map[string]any)
	domains, _ := def["allowed_domains"].([]any)
	if len(domains) < 2 {
		return nil
	}
	out := make([]any, len(domains))
	for i, d := range domains {
		one := maps.Clone(def)
		one["allowed_domains"] = []any{d}
		out[i] = one
	}
	return out
}

// sameModel reports whether the model a response names is the admitted one
// (an alias and its dated id are one entry of the price table).
func (p *Proxy) sameModel(admitted, answered string) bool {
	if admitted == answered {
		return true
	}
	a, err1 := p.admit.Prices().Model(admitted)
	b, err2 := p.admit.Prices().Model(answered)
	return err1 == nil && err2 == nil && a.Name == b.Name
}

// admissionFailed answers a failed admission and records it.
func (p *Proxy) admissionFailed(ctx context.Context, w http.ResponseWriter, runID, requestID string, in *Inspection, pl plan, err error) {
	var inv *admission.InvalidError
	var ref *Refusal
	switch {
	case errors.Is(err, admission.ErrBudgetExhausted):
		// Another request took the money between the read and the booking.
		need, _ := p.reserve(pl, in.MaxTokens)
		available, _, _ := p.admit.Available(ctx, runID)
		ref = &Refusal{Status: http.StatusPaymentRequired, Type: "billing_error", Reason: ReasonBudget, Needed: int64(need), Available: max(available, 0),
			Message: fmt.Sprintf("fluidbox: this run's budget cannot cover this request: it needs %s and %s is available", need, budget.Micros(max(available, 0)))}
	case errors.As(err, &inv):
		ref = refuse(ReasonMalformed, "%s", inv.Message)
	case errors.Is(err, admission.ErrSessionEnded):
		ref = &Refusal{Status: http.StatusForbidden, Type: "permission_error", Reason: ReasonRun, Message: "fluidbox: this run has ended"}
	case errors.Is(err, admission.ErrRunNotFound):
		ref = &Refusal{Status: http.StatusNotFound, Type: "not_found_error", Reason: ReasonRun, Message: "fluidbox: no such run"}
	default:
		p.log.ErrorContext(ctx, "model proxy: admission", "run", runID, "err", err)
		ref = &Refusal{Status: http.StatusServiceUnavailable, Type: "api_error", Reason: ReasonUnavailable, Message: "fluidbox cannot admit model requests right now"}
	}
	p.refuse(ctx, w, runID, requestID, in.Model, ref)
}

// refuse records a refusal in the run's ledger and answers it. A run that
// does not exist has no ledger to record in.
func (p *Proxy) refuse(ctx context.Context, w http.ResponseWriter, runID, requestID, model string, ref *Refusal) {
	if _, err := p.admit.Prices().Model(model); err != nil {
		// A name the price table does not know is the sandbox's own text
		// (up to the whole body): the ledger keeps only the table's names.
		model = ""
	}
	if ref.Reason != ReasonRun || ref.Status != http.StatusNotFound {
		err := p.admit.Refused(ctx, runID, redact.ModelRefused{
			RequestID: requestID, Model: model, Status: ref.Status, Reason: string(ref.Reason),
			Tool: ref.Tool, Stage: ref.Stage, Source: ref.Source, NeededMicros: ref.Needed, AvailableMicros: ref.Available,
		})
		if err != nil && !errors.Is(err, admission.ErrRunNotFound) {
			// Nothing was forwarded either way; the refusal stands.
			p.log.ErrorContext(ctx, "model proxy: record refusal", "run", runID, "request", requestID, "err", err)
		}
	}
	p.log.InfoContext(ctx, "model request refused", "run", runID, "request", requestID, "reason", ref.Reason, "tool", ref.Tool, "stage", ref.Stage, "status", ref.Status)
	WriteError(w, ref.Status, ref.Type, ref.Message)
}

// settle closes the reservation on every path, retrying a settlement that
// fails off the request path.
func (p *Proxy) settle(ctx context.Context, runID, requestID string, res admission.Reservation, pl plan, out *outcome, start time.Time) {
	// The client may be gone; the reservation still has to be settled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	u := out.usage
	if pl.in.Cache1h && u.CacheCreation1hInputTokens == 0 {
		// The request asked for 1-hour writes and the answer did not split
		// them: bill every write at the 1-hour rate, never under it.
		u.CacheCreation1hInputTokens = u.CacheCreationInputTokens
	}
	uses := map[string]int64{}
	unknown := int64(0)
	for name, n := range out.uses {
		if tool, ok := serverToolNames[name]; ok {
			uses[tool] += n
		} else {
			unknown += n
		}
	}
	if unknown > 0 {
		// The upstream's names are its text: only fluidbox's own reach the
		// ledger, and a block naming anything else is counted, never named.
		p.log.WarnContext(ctx, "model proxy: the response ran server tools fluidbox does not know", "run", runID, "request", requestID, "blocks", unknown)
	}
	u.WebSearchRequests = max(u.WebSearchRequests, out.uses["web_search"])
	u.WebFetchRequests = max(u.WebFetchRequests, out.uses["web_fetch"])
	if u.WebSearchRequests > 0 {
		uses[capability.ToolWebSearch] = u.WebSearchRequests
	}
	if u.WebFetchRequests > 0 {
		uses[capability.ToolWebFetch] = u.WebFetchRequests
	}
	attempt := func(ctx context.Context) (admission.Settled, error) {
		if out.settlement == admission.SettlementUsage {
			return p.admit.Reconcile(ctx, runID, requestID, u, uses)
		}
		return p.admit.Settle(ctx, runID, requestID, out.settlement, u, out.haveUsage, uses)
	}
	log := func(st admission.Settled, err error) {
		if err != nil {
			p.log.ErrorContext(ctx, "model proxy: settle failed after retries; the sweep will settle it in full", "run", runID, "request", requestID, "err", err)
			return
		}
		p.log.InfoContext(ctx, "model request", "run", runID, "request", requestID, "reservation", res.ID,
			"model", res.Model, "status", out.status, "reserved", res.Amount.String(), "cost", st.Cost.String(),
			"settlement", st.Settlement, "server_tools", len(uses), "ms", p.upstreams.now().Sub(start).Milliseconds())
		p.tel.ModelRequested(ctx, start, telemetry.ModelRequest{Run: runID, Model: res.Model, Status: int64(out.status), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens})
		if res.Created {
			p.tel.BudgetReserved(ctx, int64(res.Amount))
		}
		if st.Applied {
			p.tel.BudgetSpent(ctx, int64(st.Cost))
		}
	}
	st, err := p.admit.SettleRetrying(sctx, attempt, log)
	if err == nil {
		log(st, nil)
	} else {
		p.log.WarnContext(ctx, "model proxy: settle failed; retrying in the background", "run", runID, "request", requestID, "err", err)
	}
}

// serverToolNames maps the name a response's server_tool_use block gives
// to the tool of the anthropic-server-tools bundle (code execution runs as
// its bash and text-editor parts).
var serverToolNames = map[string]string{
	"web_search":                 capability.ToolWebSearch,
	"web_fetch":                  capability.ToolWebFetch,
	"code_execution":             capability.ToolCodeExecution,
	"bash_code_execution":        capability.ToolCodeExecution,
	"text_editor_code_execution": capability.ToolCodeExecution,
}

// outcome is what the settlement of one request is decided from.
type outcome struct {
	settlement admission.Settlement
	usage      budget.Usage
	haveUsage  bool
	uses       map[string]int64 // server_tool_use blocks by name
	status     int
}

// stream passes a server-sent-event stream through, flushing as it goes,
// and follows its usage.
func (p *Proxy) stream(w http.ResponseWriter, body io.Reader, pl plan, out *outcome) {
	su := budget.NewStreamUsage()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			_, _ = su.Write(buf[:n])
			if m := su.Model(); m != "" && !p.sameModel(pl.in.Model, m) {
				// Another model than admitted: cut, and settle in full.
				out.settlement = admission.SettlementPessimistic
				return
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				break // the client left; settle on what was seen
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				break
			}
		}
		if err != nil {
			break // io.EOF, or the upstream cut the stream
		}
	}
	u, ok := su.Usage()
	out.uses = su.ServerToolUses()
	switch {
	case su.Model() == "":
		// A stream that does not name its model cannot be priced as the
		// admitted one: settle in full.
		out.settlement = admission.SettlementPessimistic
	case ok && su.Complete():
		out.settlement, out.usage, out.haveUsage = admission.SettlementUsage, u, true
	case ok && !su.Produced() && su.Errored():
		// The upstream stopped before any content, and said so: what
		// message_start counted is what ran. Without its word (the client
		// left, the connection dropped) the model may have been writing
		// what the stream had not shown yet (thinking with display
		// "omitted" shows nothing until it ends), so the cases below apply.
		out.settlement, out.usage, out.haveUsage = admission.SettlementPartial, u, true
	case ok && len(pl.in.ServerTools) == 0:
		// Content was generated that only the missing message_delta
		// counts (a client may read a whole answer and leave before it):
		// bill output at the bound it was admitted with, never below.
		u.OutputTokens = max(u.OutputTokens, pl.in.MaxTokens)
		out.settlement, out.usage, out.haveUsage = admission.SettlementPartial, u, true
	default:
		// With server tools every sampling step reads the context again,
		// and message_start counted only the first: settle in full.
		out.settlement = admission.SettlementPessimistic
	}
}

// copyRequestHeaders passes on the headers the Messages API defines for a
// request, and nothing else: not the session token, cookies or anything a
// sandbox could use to smuggle instructions to an intermediary.
func copyRequestHeaders(dst, src http.Header) {
	dst.Set("Content-Type", "application/json")
	dst.Set("User-Agent", "fluidbox-model-proxy")
	if v := src.Get("Anthropic-Version"); v != "" {
		dst.Set("Anthropic-Version", v) // one of apiVersions: Inspect admits no other
	} else {
		dst.Set("Anthropic-Version", defaultVersion)
	}
	for _, v := range src.Values("Anthropic-Beta") {
		dst.Add("Anthropic-Beta", v)
	}
	if v := src.Get("Accept"); v != "" {
		dst.Set("Accept", v)
	}
}

// responseHeaders are the upstream's response headers an Anthropic client
// reads about its own request: the content type, the request id and retry
// advice. Nothing else passes, above all not the anthropic-* family: it
// names the operator's organization and carries its organization-wide rate
// limits and counts (every run's traffic, and Priority Tier capacity),
// which are no sandbox's business and tell it how loaded the operator is.
var responseHeaders = []string{"Content-Type", "Request-Id", "Retry-After", "Retry-After-Ms", "X-Should-Retry"}

// copyResponseHeaders passes on responseHeaders, and nothing else.
func copyResponseHeaders(dst, src http.Header) {
	for _, k := range responseHeaders {
		if vs := src.Values(k); len(vs) > 0 {
			dst[k] = append([]string(nil), vs...)
		}
	}
	if strings.HasPrefix(dst.Get("Content-Type"), "text/event-stream") {
		dst.Set("Cache-Control", "no-cache")
		dst.Set("X-Accel-Buffering", "no")
	}
}

// WriteError answers in the Anthropic API's error shape, which every
// Anthropic client decodes: {"type":"error","error":{"type","message"}}.
// Messages are fixed texts: never a prompt, a key or an internal error.
func WriteError(w http.ResponseWriter, status int, typ, message string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
