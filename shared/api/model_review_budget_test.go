package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/budget"
)

// TestModelProxyLowersMaxTokensOnLargeBudgets: max_tokens is lowered to
// what the budget affords on a run of any size. On a $20M run a request
// whose max_tokens alone costs more (5e12 tokens of claude-haiku-4-5 at $5
// per million) is forwarded with max_tokens at exactly what is left after
// the input bound: not refused with a 402 that says it needs less than is
// available, which a product overflowing int64 made it.
func TestModelProxyLowersMaxTokensOnLargeBudgets(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":10,"output_tokens":10}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	const limit = 20_000_000 // USD
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: limit})
	body := strings.Replace(msgBody(""), `"max_tokens":256`, `"max_tokens":5000000000000`, 1)
	st, resp := p.post(id, tok, body)
	if st != 200 {
		t.Fatalf("a request the budget affords with max_tokens lowered = %d %s, want it forwarded", st, resp)
	}
	var fwd struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(up.received()[0], &fwd); err != nil {
		t.Fatal(err)
	}
	// The input bound at the 5-minute write rate ($1.25 per million),
	// rounded up on its own, then every output token ($5 per million) the
	// rest affords.
	fixed := ((int64(len(body))+8192)*1_250_000 + 999_999) / 1_000_000
	want := (limit*1_000_000 - fixed) / 5 // micros left, at 5 micros a token
	if fwd.MaxTokens != want {
		t.Errorf("forwarded max_tokens %d, want %d", fwd.MaxTokens, want)
	}
	p.waitSettled(id, 1)
	if res := p.budgetEvents(id)[0]; res["max_tokens_forwarded"] != float64(want) || res["reserved_micros"].(float64) > limit*1_000_000 {
		t.Errorf("budget.reserved = %v, want max_tokens_forwarded %d within the budget", res, want)
	}
}

// TestModelProxyFetchBoundCountsOutputReread: with server tools every
// sampling step reads the context again, and that context holds what the
// model wrote in the steps before (up to max_tokens), not only the fetched
// pages. A request offering five web fetches of one token each with
// max_tokens 20000 may be billed for six reads of the request plus five of
// the 20,000 tokens written: its reservation covers that cost.
func TestModelProxyFetchBoundCountsOutputReread(t *testing.T) {
	t.Parallel()
	const maxTokens, uses = 20000, 5
	body := strings.Replace(msgBody(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5,"max_content_tokens":1,"allowed_domains":["docs.example.com"]}]`),
		`"max_tokens":256`, `"max_tokens":20000`, 1)
	first := int64(len(body)) + 8192
	// Step 0 reads the request; step i reads it again, with everything
	// written so far and i fetched results of at most twice one token.
	worst := first
	for i := int64(1); i <= uses; i++ {
		worst += first + maxTokens + 2*i
	}
	up := newRecorder(t, answerJSON("claude-haiku-4-5", fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"server_tool_use":{"web_fetch_requests":%d}}`, worst, maxTokens, uses), `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 5, bundle: "anthropic-server-tools"})
	if st, resp := p.post(id, tok, body); st != 200 {
		t.Fatalf("web fetch request = %d %s", st, resp)
	}
	p.waitSettled(id, 1)
	evs := p.budgetEvents(id)
	reserved, cost := evs[0]["reserved_micros"].(float64), evs[1]["cost_micros"].(float64)
	if want := float64(haikuCost(budget.Usage{InputTokens: worst, OutputTokens: maxTokens})); cost != want {
		t.Fatalf("cost %v, want %v", cost, want)
	}
	if cost > reserved {
		t.Errorf("reserved %v micros for a request that may cost %v: the reservation is not an upper bound", reserved, cost)
	}
}

// TestModelProxyResponseWithoutModel: a response that names no model
// cannot be checked against the admitted one, so its usage is not priced
// at the admitted model's rates: streamed or not, it is settled at the full
// reservation.
func TestModelProxyResponseWithoutModel(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, func(w http.ResponseWriter, body []byte) {
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"+
			"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	for i, stream := range []string{"", `,"stream":true`} {
		if st, resp := p.post(id, tok, msgBody(stream)); st != 200 {
			t.Fatalf("request %d = %d %s", i, st, resp)
		}
		p.waitSettled(id, i+1)
		evs := p.budgetEvents(id)
		res, rec := evs[len(evs)-2], evs[len(evs)-1]
		if rec["settlement"] != "pessimistic" || rec["cost_micros"] != res["reserved_micros"] {
			t.Errorf("request %d: settled %v, want the full reservation %v", i, rec, res["reserved_micros"])
		}
	}
}

// TestModelProxyClientLeavesBeforeContent: after message_start the model
// may be generating for long before the first content block reaches the
// stream (thinking with display "omitted" shows nothing until it ends).
// A client that leaves in that window cannot have its request settled at
// message_start's one output token: the output is billed at max_tokens.
// Only the upstream's own error event, saying it stopped, settles such a
// stream at what message_start counted.
func TestModelProxyClientLeavesBeforeContent(t *testing.T) {
	t.Parallel()
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"usage\":{\"input_tokens\":700,\"output_tokens\":1}}}\n\n"
	released := make(chan struct{})
	defer close(released)
	up := newRecorder(t, func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, start)
		w.(http.Flusher).Flush()
		if bytes.Contains(body, []byte("overloaded")) {
			io.WriteString(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
			return
		}
		io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
		w.(http.Flusher).Flush()
		<-released // thinking, until the proxy gives up on us
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	body := func(prompt string) string {
		return `{"model":"claude-haiku-4-5","max_tokens":4000,"stream":true,"thinking":{"type":"adaptive","display":"omitted"},"messages":[{"role":"user","content":"` + prompt + `"}]}`
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url+"/v1/sessions/"+id+"/model/v1/messages", strings.NewReader(body("think long")))
	req.Header.Set("x-api-key", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line = %q", line)
	}
	cancel()
	resp.Body.Close()
	p.waitSettled(id, 1)
	if rec := p.budgetEvents(id)[1]; rec["output_tokens"] != 4000.0 || rec["cost_micros"] != float64(haikuCost(budget.Usage{InputTokens: 700, OutputTokens: 4000})) {
		t.Errorf("client gone before content: settled %v, want the output at max_tokens 4000", rec)
	}

	if st, _ := p.post(id, tok, body("overloaded")); st != 200 {
		t.Fatalf("overloaded stream = %d", st)
	}
	p.waitSettled(id, 2)
	if rec := p.budgetEvents(id)[3]; rec["settlement"] != "partial" || rec["cost_micros"] != float64(haikuCost(budget.Usage{InputTokens: 700, OutputTokens: 1})) {
		t.Errorf("upstream error before content: settled %v, want partial at message_start's counts", rec)
	}
}

// TestModelProxyImageReservesItsPixels: an image is billed by its pixels
// (at most some 5,000 tokens at the largest resolution a model reads), so
// a request with a screenshot is reserved at that, not at the model's whole
// context window as if it were a PDF: on a $1 run a claude-haiku-4-5
// request with one image is forwarded, and reserved under $0.05.
func TestModelProxyImageReservesItsPixels(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1700,"output_tokens":10}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	// The image is a tool's result: the call was asked and allowed (the
	// proxy checks that every result answers one).
	if d := p.ask(id, tok, "toolu_1", "Bash", bash("git status")); d.body["decision"] != "allow" {
		t.Fatalf("gate = %s", d.raw)
	}
	body := `{"model":"claude-haiku-4-5","max_tokens":256,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"git status"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}}]},{"type":"text","text":"` + promptCanary + `"}]}]}`
	if st, resp := p.post(id, tok, body); st != 200 {
		t.Fatalf("a request with one image on a $1 run = %d %s, want it forwarded", st, resp)
	}
	p.waitSettled(id, 1)
	if res := p.budgetEvents(id)[0]; res["reserved_micros"].(float64) > 50_000 || res["max_tokens_requested"] != nil {
		t.Errorf("budget.reserved = %v, want under $0.05 with max_tokens as sent", res)
	}
}
