package broker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// exchange is one POST as the upstream saw it: the MCP headers and what the
// body says the same things are.
type exchange struct {
	Method, HeaderMethod string
	Version, MetaVersion string
	Name, HeaderName     string
	Session              bool
}

// wire records every POST to an upstream and refuses (HTTP 400) one whose
// MCP headers disagree with its body, whatever revision it claims: a
// header that says one method or tool while the body says another is how a
// gateway in front of the server would be misled.
type wire struct {
	mu  sync.Mutex
	log []exchange
}

func (w *wire) check(h http.Header, body []byte) error {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return fmt.Errorf("body is not one JSON-RPC message: %w", err)
	}
	ex := exchange{
		Method: msg.Method, HeaderMethod: h.Get("Mcp-Method"),
		Version: h.Get("MCP-Protocol-Version"), Name: msg.Params.Name, HeaderName: h.Get("Mcp-Name"),
		Session: h.Get("Mcp-Session-Id") != "",
	}
	ex.MetaVersion, _ = msg.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string)
	w.mu.Lock()
	w.log = append(w.log, ex)
	w.mu.Unlock()
	switch {
	case ex.HeaderMethod != "" && ex.HeaderMethod != ex.Method:
		return errors.New("Mcp-Method differs from the body's method")
	case ex.HeaderName != ex.Name && (ex.HeaderName != "" || ex.Method == "tools/call" && ex.Version == "2026-07-28"):
		return errors.New("Mcp-Name differs from the body's tool name")
	case ex.MetaVersion != "" && ex.MetaVersion != ex.Version:
		return errors.New("MCP-Protocol-Version differs from the body's _meta protocolVersion")
	case ex.Version == "2026-07-28" && (ex.HeaderMethod == "" || ex.MetaVersion == "" && ex.Method != "notifications/cancelled"):
		return errors.New("a 2026-07-28 request without Mcp-Method or _meta protocolVersion")
	}
	return nil
}

func (w *wire) exchanges() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]exchange(nil), w.log...)
}

// TestBothRevisions: the broker lists and calls tools on a server of each
// revision (the official Go SDK's server pinned to one with
// SupportedProtocolVersions): stateless 2026-07-28 (server/discover, the
// version and client capabilities in every request's _meta, Mcp-Method and
// Mcp-Name, no initialize, no session) to a server that offers it, and the
// 2025-11-25 handshake and session to one that does not. Both give the same
// photograph, so a connection whose server moves to the new revision does
// not look drifted.
func TestBothRevisions(t *testing.T) {
	t.Parallel()
	echo := exchange{Method: "tools/call", Name: "echo"}
	list := exchange{Method: "tools/list"}
	cases := []struct {
		version string
		want    []exchange
	}{
		{"2026-07-28", []exchange{
			{Method: "server/discover", HeaderMethod: "server/discover", Version: "2026-07-28", MetaVersion: "2026-07-28"},
			{Method: list.Method, HeaderMethod: list.Method, Version: "2026-07-28", MetaVersion: "2026-07-28"},
			{Method: echo.Method, HeaderMethod: echo.Method, Version: "2026-07-28", MetaVersion: "2026-07-28", Name: "echo", HeaderName: "echo"},
		}},
		{"2025-11-25", []exchange{
			// The SDK asks for the newest revision first; this server
			// refuses it, and the handshake of the older one follows.
			{Method: "server/discover", HeaderMethod: "server/discover", Version: "2026-07-28", MetaVersion: "2026-07-28"},
			{Method: "initialize"},
			{Method: "notifications/initialized", Version: "2025-11-25", Session: true},
			{Method: list.Method, Version: "2025-11-25", Session: true},
			{Method: echo.Method, Version: "2025-11-25", Name: "echo", Session: true},
		}},
	}
	var digests []string
	for _, tc := range cases {
		w := &wire{}
		u := newUpstream(t, upstreamOpts{versions: []string{tc.version}, stateless: tc.version == "2026-07-28", check: w.check})
		s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
		if err != nil {
			t.Fatalf("%s: Connect: %v; exchanges %+v", tc.version, err, w.exchanges())
		}
		photo, err := s.ListTools(t.Context())
		if err != nil {
			t.Fatalf("%s: ListTools: %v", tc.version, err)
		}
		res, err := s.CallTool(t.Context(), "echo", map[string]any{"text": "hi"})
		if err != nil || res.IsError || string(res.Content) != `[{"type":"text","text":"hi"}]` {
			t.Fatalf("%s: CallTool(echo) = %s, %v", tc.version, res.Content, err)
		}
		got := w.exchanges()
		s.Close()
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: exchanges (-want +got):\n%s", tc.version, diff)
		}
		digests = append(digests, photo.Digest)
		// The broker's meanings hold in either revision.
		if _, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "nope", nil); !errors.Is(err, broker.ErrUnknownTool) {
			t.Errorf("%s: CallTool(nope) = %v, want ErrUnknownTool", tc.version, err)
		}
		bad := seal.Credential{Type: seal.TypeBearer, Token: wrongCanary}
		if _, err := broker.ListTools(t.Context(), loopback, u.srv.URL, bad); !errors.Is(err, broker.ErrUnauthorized) {
			t.Errorf("%s: ListTools(wrong token) = %v, want ErrUnauthorized", tc.version, err)
		} else {
			assertNoSecret(t, err)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("the same tools photographed over 2026-07-28 and 2025-11-25: digests %s and %s", digests[0], digests[1])
	}
}
