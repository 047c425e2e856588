// Package modelproxy is the model-access inversion: a sandbox's API key is
// its run's session token, and fluidbox forwards its Anthropic Messages API
// requests upstream with the operator's key, which never enters the
// sandbox.
//
// What it guarantees:
//   - Nothing is forwarded without an admission. Each request books a
//     reservation first, pessimistically: the declared max_tokens as the
//     output bound and the request's byte length as the input bound (a token
//     is never shorter than a byte, so that bound is genuine). A run short of
//     money gets a 402 billing_error, in the shape Anthropic clients decode.
//   - Every reservation it books is settled on every path it controls:
//     complete usage reconciles it; a stream that ends early (cut upstream,
//     error event, client gone) reconciles what was seen; a response without
//     usage settles the full reservation; an upstream that refused the
//     request outright (an error status, or no connection at all) releases
//     it, since neither is billed. If even the settlement cannot be written
//     (the store is down), the sweep settles it in full later.
//   - The operator's credential is opened per request, in this process
//     only, and set on the upstream request alone; the session token is
//     never forwarded, and only allow-listed headers cross in either
//     direction.
//   - Prompts and completions pass through and are kept nowhere: not in the
//     ledger (only ids, token counts and cost), not in logs, not in error
//     bodies (which are fixed texts).
package modelproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/ids"
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
)

// Proxy forwards Messages API requests of runs to the model upstream.
type Proxy struct {
	admit     *admission.Service
	upstreams *Upstreams
	client    *http.Client
	log       *slog.Logger
}

// New returns a proxy. client may be nil for a default without an overall
// timeout (a stream lasts as long as the model writes) but with bounded
// connection setup.
func New(admit *admission.Service, upstreams *Upstreams, client *http.Client, log *slog.Logger) *Proxy {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
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
	return &Proxy{admit: admit, upstreams: upstreams, client: &c, log: log}
}

// head is what the proxy reads of a request body; the rest passes through.
type head struct {
	Model     *string `json:"model"`
	MaxTokens *int64  `json:"max_tokens"`
	Stream    *bool   `json:"stream"`
}

// ServeMessages proxies one POST .../v1/messages of runID, whose caller the
// API layer has already authenticated with that run's session token.
func (p *Proxy) ServeMessages(w http.ResponseWriter, r *http.Request, runID string) {
	ctx := r.Context()
	start := p.upstreams.now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, "request_too_large", "request body is over 32 MiB")
		return
	case err != nil:
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "could not read the request body")
		return
	}
	var h head
	if err := json.Unmarshal(body, &h); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "the body must be a JSON object with model (string) and max_tokens (integer)")
		return
	}
	if h.Model == nil || *h.Model == "" {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "model: field required")
		return
	}
	if h.MaxTokens == nil || *h.MaxTokens < 1 {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: must be an integer of at least 1")
		return
	}
	up, err := p.upstreams.Open(ctx)
	if err != nil {
		p.log.ErrorContext(ctx, "model proxy: upstream", "run", runID, "err", err)
		WriteError(w, http.StatusServiceUnavailable, "api_error", "fluidbox cannot reach a model upstream right now")
		return
	}

	requestID := ids.New("req_")
	res, err := p.admit.Admit(ctx, runID, admission.Request{
		RequestID: requestID, Model: *h.Model, MaxOutputTokens: *h.MaxTokens, InputTokensUpperBound: int64(len(body)),
	})
	if err != nil {
		p.refuse(w, r, runID, err)
		return
	}

	out := outcome{settlement: admission.SettlementPessimistic}
	defer func() {
		// The client may be gone; the reservation still has to be settled.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		var st admission.Settled
		var err error
		if out.settlement == admission.SettlementUsage {
			st, err = p.admit.Reconcile(sctx, runID, requestID, out.usage)
		} else {
			st, err = p.admit.Settle(sctx, runID, requestID, out.settlement, out.usage, out.haveUsage)
		}
		if err != nil {
			p.log.ErrorContext(ctx, "model proxy: settle; the sweep will settle it in full", "run", runID, "request", requestID, "err", err)
			return
		}
		p.log.InfoContext(ctx, "model request", "run", runID, "request", requestID, "reservation", res.ID,
			"model", res.Model, "stream", h.Stream != nil && *h.Stream, "status", out.status,
			"reserved", res.Amount.String(), "cost", st.Cost.String(), "settlement", st.Settlement, "ms", p.upstreams.now().Sub(start).Milliseconds())
	}()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "api_error", "fluidbox could not build the upstream request")
		return
	}
	req.URL.RawQuery = r.URL.RawQuery // ?beta=true, as Claude Code sends
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
	copyResponseHeaders(w.Header(), resp.Header)

	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		// An error answer is not billed: release, and pass it on.
		out.settlement = admission.SettlementReleased
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		p.stream(w, resp.Body, &out)
	default:
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		if err != nil {
			WriteError(w, http.StatusBadGateway, "api_error", "the model upstream's answer was cut short")
			return
		}
		if u, err := budget.UsageFromBody(b); err == nil {
			out.settlement, out.usage, out.haveUsage = admission.SettlementUsage, u, true
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}
}

// outcome is what the settlement of one request is decided from.
type outcome struct {
	settlement admission.Settlement
	usage      budget.Usage
	haveUsage  bool
	status     int
}

// stream passes a server-sent-event stream through, flushing as it goes,
// and follows its usage.
func (p *Proxy) stream(w http.ResponseWriter, body io.Reader, out *outcome) {
	su := budget.NewStreamUsage()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			_, _ = su.Write(buf[:n])
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
	switch {
	case ok && su.Complete():
		out.settlement, out.usage, out.haveUsage = admission.SettlementUsage, u, true
	case ok:
		out.settlement, out.usage, out.haveUsage = admission.SettlementPartial, u, true
	default:
		out.settlement = admission.SettlementPessimistic
	}
}

// refuse answers a failed admission in Anthropic's error shape.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, runID string, err error) {
	var inv *admission.InvalidError
	switch {
	case errors.Is(err, admission.ErrBudgetExhausted):
		WriteError(w, http.StatusPaymentRequired, "billing_error", "fluidbox: this run's budget cannot cover this request (max_tokens plus the request size); the run is out of budget")
	case errors.Is(err, admission.ErrUnknownModel):
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "model: not in fluidbox's price table; unpriced models are refused")
	case errors.As(err, &inv):
		WriteError(w, http.StatusBadRequest, "invalid_request_error", inv.Message)
	case errors.Is(err, admission.ErrSessionEnded):
		WriteError(w, http.StatusForbidden, "permission_error", "fluidbox: this run has ended")
	case errors.Is(err, admission.ErrRunNotFound):
		WriteError(w, http.StatusNotFound, "not_found_error", "fluidbox: no such run")
	default:
		p.log.ErrorContext(r.Context(), "model proxy: admission", "run", runID, "err", err)
		WriteError(w, http.StatusServiceUnavailable, "api_error", "fluidbox cannot admit model requests right now")
	}
}

// copyRequestHeaders passes on the headers the Messages API defines for a
// request, and nothing else: not the session token, cookies or anything a
// sandbox could use to smuggle instructions to an intermediary.
func copyRequestHeaders(dst, src http.Header) {
	dst.Set("Content-Type", "application/json")
	dst.Set("User-Agent", "fluidbox-model-proxy")
	if v := src.Get("Anthropic-Version"); v != "" {
		dst.Set("Anthropic-Version", v)
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

// copyResponseHeaders passes on what an Anthropic client reads from a
// response: the content type, the request id, retry advice and the
// anthropic-* family (rate limits, organization).
func copyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		switch ck := http.CanonicalHeaderKey(k); {
		case ck == "Content-Type", ck == "Request-Id", ck == "Retry-After", ck == "X-Should-Retry",
			strings.HasPrefix(ck, "Anthropic-"):
			dst[ck] = append([]string(nil), vs...)
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
