package connection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Tool is one photographed tool as a refresh shows it to the human who
// reviews it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema is absent for a tool that declares none.
	OutputSchema json.RawMessage     `json:"output_schema,omitempty"`
	Annotations  *broker.Annotations `json:"annotations,omitempty"`
	Class        string              `json:"class"`
	Callable     bool                `json:"callable"`
	Reason       string              `json:"reason,omitempty"`
}

// RefreshResult is the answer of POST /v1/connections/{id}/tools/refresh.
type RefreshResult struct {
	Tools       []Tool          `json:"tools"`
	Digest      string          `json:"digest"`
	RefreshedAt string          `json:"refreshed_at"`
	Changes     []broker.Change `json:"changes"`
}

// Refresh photographs the upstream's tools with the connection's credential,
// guards each schema, classifies each tool, stores the photograph as the
// connection's latest and reports the changes against the previous one.
// Existing runs keep what they froze; only runs created afterwards see it.
func (s *Service) Refresh(ctx context.Context, who auth.Principal, ref string) (RefreshResult, error) {
	if s.sealer == nil {
		return RefreshResult{}, ErrNoSealer
	}
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return RefreshResult{}, err
	}
	if !mayManage(who, c) {
		return RefreshResult{}, fmt.Errorf("%w: only the owner of a personal connection (an admin for a shared one) may refresh it", ErrForbidden)
	}
	if c.Status == store.ConnectionAuthorizationRequired {
		return RefreshResult{}, ErrAuthorizationRequired
	}
	if c.Status != store.ConnectionActive {
		return RefreshResult{}, ErrRevoked
	}
	cred, err := s.credential(ctx, c, c.Generation, false)
	if err != nil {
		return RefreshResult{}, authorizationError(err)
	}
	lctx, cancel := context.WithTimeout(ctx, s.opts.ListTimeout)
	defer cancel()
	photo, err := broker.ListTools(lctx, s.opts.Egress, c.URL, cred)
	if serr := s.scopeChallenge(ctx, c, c.Generation, err, false); serr != nil {
		return RefreshResult{}, authorizationError(serr)
	}
	if errors.Is(err, broker.ErrUnauthorized) && c.CredentialType == CredentialOAuth {
		if cred, err = s.credential(lctx, c, c.Generation, true); err != nil {
			return RefreshResult{}, authorizationError(err)
		}
		photo, err = broker.ListTools(lctx, s.opts.Egress, c.URL, cred)
		if serr := s.scopeChallenge(ctx, c, c.Generation, err, true); serr != nil {
			return RefreshResult{}, authorizationError(serr)
		}
	}
	if err != nil {
		return RefreshResult{}, err
	}
	now := store.FormatTime(s.opts.Now())
	sp, tools, err := photograph(c, photo, now)
	if err != nil {
		return RefreshResult{}, err
	}
	previous := broker.Photo{}
	if c.PhotoDigest != "" {
		old, err := s.st.GetPhoto(ctx, c.ID, c.PhotoDigest)
		if err != nil {
			return RefreshResult{}, err
		}
		if previous, err = brokerPhoto(old); err != nil {
			return RefreshResult{}, err
		}
	}
	err = s.st.PutPhoto(ctx, sp)
	if errors.Is(err, store.ErrConnectionChanged) {
		return RefreshResult{}, ErrChanged
	}
	if err != nil {
		return RefreshResult{}, err
	}
	s.tools.put(c.ID, c.Generation, photo, s.opts.Now())
	changes := broker.Diff(previous, photo)
	if changes == nil {
		changes = []broker.Change{}
	}
	return RefreshResult{Tools: tools, Digest: photo.Digest, RefreshedAt: now, Changes: changes}, nil
}

// authorizationError is ErrAuthorizationRequired for a lost grant.
func authorizationError(err error) error {
	if errors.Is(err, errAuthorizationLost) {
		return ErrAuthorizationRequired
	}
	return err
}

// photograph turns an upstream's tool list into the stored photograph and
// the reviewer's view: per tool the class, the schema guard's verdict and
// the digests a run will freeze.
func photograph(c store.Connection, photo broker.Photo, at string) (store.Photo, []Tool, error) {
	sp := store.Photo{ConnectionID: c.ID, Digest: photo.Digest, TakenAt: at}
	tools := make([]Tool, 0, len(photo.Tools))
	for _, def := range photo.Tools {
		td, err := broker.ToolDigest(def)
		if err != nil {
			return store.Photo{}, nil, fmt.Errorf("connection: digest tool of %s: %w", c.ID, err)
		}
		pt := store.PhotoTool{
			Name: def.Name, Description: def.Description, InputSchema: string(def.InputSchema), OutputSchema: string(def.OutputSchema),
			Class: string(classOf(c.ToolClasses[def.Name], def.Annotations)), ToolDigest: td,
		}
		if def.Annotations != nil {
			b, err := json.Marshal(def.Annotations)
			if err != nil {
				return store.Photo{}, nil, err
			}
			pt.Annotations = string(b)
		}
		if d, err := schemaguard.Digest(def.InputSchema); err == nil {
			pt.SchemaDigest = d
		}
		_, err = schemaguard.Compile(def.InputSchema)
		var rej *schemaguard.RejectError
		switch {
		case err == nil:
			pt.Callable = true
		case errors.As(err, &rej):
			pt.Reason = "the tool's input schema was refused: " + rej.Reason
		default:
			pt.Reason = "the tool's input schema could not be checked"
		}
		schema, output, annotations := def.InputSchema, def.OutputSchema, def.Annotations
		if reason := bound(&pt); reason != "" {
			pt.Callable, pt.Reason = false, reason
			if pt.InputSchema == "" {
				schema = nil
			}
			if pt.OutputSchema == "" {
				output = nil
			}
			if pt.Annotations == "" {
				annotations = nil
			}
		}
		sp.Tools = append(sp.Tools, pt)
		tools = append(tools, Tool{
			Name: pt.Name, Description: pt.Description, InputSchema: schema, OutputSchema: output, Annotations: annotations,
			Class: pt.Class, Callable: pt.Callable, Reason: pt.Reason,
		})
	}
	return sp, tools, nil
}

// Bounds on a photographed tool's fields. The upstream chose them, so each
// is bounded: a tool over a bound stays in the photograph, un-callable,
// with the reason and the field cut (a name to a distinct cutName, a
// schema or annotations dropped), so
// that one careless or hostile tool can neither make every refresh fail
// nor a stored item exceed DynamoDB's 400 KB.
const (
	MaxToolNameBytes        = 128
	MaxToolDescriptionBytes = 16 << 10
	MaxToolSchemaBytes      = 64 << 10
	MaxToolAnnotationsBytes = 4 << 10
)

// bound cuts pt's fields to the bounds and says why, or returns "".
func bound(pt *store.PhotoTool) string {
	var over []string
	if len(pt.Name) > MaxToolNameBytes {
		pt.Name = cutName(pt.Name)
		over = append(over, fmt.Sprintf("name over %d bytes", MaxToolNameBytes))
	}
	if len(pt.Description) > MaxToolDescriptionBytes {
		pt.Description = cut(pt.Description, MaxToolDescriptionBytes)
		over = append(over, fmt.Sprintf("description over %d bytes", MaxToolDescriptionBytes))
	}
	if len(pt.InputSchema) > MaxToolSchemaBytes {
		pt.InputSchema = ""
		over = append(over, fmt.Sprintf("input schema over %d bytes", MaxToolSchemaBytes))
	}
	if len(pt.OutputSchema) > MaxToolSchemaBytes {
		pt.OutputSchema = ""
		over = append(over, fmt.Sprintf("output schema over %d bytes", MaxToolSchemaBytes))
	}
	if len(pt.Annotations) > MaxToolAnnotationsBytes {
		pt.Annotations = ""
		over = append(over, fmt.Sprintf("annotations over %d bytes", MaxToolAnnotationsBytes))
	}
	if len(over) == 0 {
		return ""
	}
	return "the tool is too large to keep: " + strings.Join(over, ", ")
}

// cutName is what an over-long tool name is kept as: its first
// MaxToolNameBytes, an ellipsis and a digest of the whole name. A name
// merely cut could equal another tool's (one at the bound, or another
// over-long name with the same start), and a photograph naming one tool
// twice could neither be attached to a run nor rebuilt by the next
// refresh. This one is longer than any name kept whole, and two differ
// whenever the names do.
func cutName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return cut(name, MaxToolNameBytes) + "\u2026" + hex.EncodeToString(sum[:16])
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// brokerPhoto rebuilds the upstream's photo from a stored photograph.
func brokerPhoto(p store.Photo) (broker.Photo, error) {
	defs := make([]broker.ToolDef, 0, len(p.Tools))
	for _, t := range p.Tools {
		def := broker.ToolDef{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.InputSchema), OutputSchema: json.RawMessage(t.OutputSchema)}
		if t.InputSchema == "" {
			// Dropped for its size (bound): any schema keeps the
			// rebuilt photo digestible; the tool is un-callable.
			def.InputSchema = json.RawMessage(`{}`)
		}
		if t.Annotations != "" {
			def.Annotations = &broker.Annotations{}
			if err := json.Unmarshal([]byte(t.Annotations), def.Annotations); err != nil {
				return broker.Photo{}, fmt.Errorf("connection: decode photograph %s of %s: %w", p.Digest, p.ConnectionID, err)
			}
		}
		defs = append(defs, def)
	}
	return broker.NewPhoto(defs)
}

// toolCache remembers, per connection and generation, the broker's last look
// at an upstream's tools, for UpstreamToolsTTL. It holds digests, never a
// credential.
type toolCache struct {
	mu sync.Mutex
	m  map[string]cachedTools
}

type cachedTools struct {
	generation int
	digest     string
	tools      map[string]string // tool name -> tool digest
	at         time.Time
}

const maxCachedConnections = 1024

func newToolCache() *toolCache { return &toolCache{m: map[string]cachedTools{}} }

func (c *toolCache) put(id string, generation int, p broker.Photo, at time.Time) {
	tools := toolDigests(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedConnections {
		clear(c.m)
	}
	c.m[id] = cachedTools{generation: generation, digest: p.Digest, tools: tools, at: at}
}

func (c *toolCache) get(id string, generation int, ttl time.Duration, now time.Time) (cachedTools, bool) {
	if ttl <= 0 {
		return cachedTools{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.generation != generation || now.Sub(e.at) >= ttl || now.Before(e.at) {
		return cachedTools{}, false
	}
	return e, true
}

func (c *toolCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// toolDigests maps each tool of p to the digest of its definition; a tool
// whose digest cannot be computed is left out (and so never matches).
func toolDigests(p broker.Photo) map[string]string {
	out := make(map[string]string, len(p.Tools))
	for _, t := range p.Tools {
		if d, err := broker.ToolDigest(t); err == nil {
			out[t.Name] = d
		}
	}
	return out
}
