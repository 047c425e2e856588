package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

// ForbiddenError is a request the caller may not make, whatever it fixes:
// attaching another member's personal connection.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// MaxConnections bounds how many connections one run may attach.
const MaxConnections = 16

// BrokeredPrefix starts every brokered tool's name: mcp__<connection>__<tool>.
const BrokeredPrefix = "mcp__"

// BrokeredName is the name a run gives an upstream tool of a connection.
// Connection names contain no "__" and do not end in "_", so the name
// splits back unambiguously.
func BrokeredName(connection, tool string) string {
	return BrokeredPrefix + connection + "__" + tool
}

// BrokeredConnection is BrokeredName's inverse: the connection name a
// brokered tool's name starts with, or false for a name of no such form.
func BrokeredConnection(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, BrokeredPrefix)
	if !ok {
		return "", false
	}
	conn, _, ok := strings.Cut(rest, "__")
	return conn, ok && conn != ""
}

// resolveConnections freezes the named connections: each must exist, be
// active and photographed, and a personal one may be attached only by its
// owner. Each binding records the generation, owner and tool-set digest as
// they are now; each photographed tool becomes mcp__<name>__<tool> with the
// class, schema and callability of the photograph (the schema passes the
// pre-guard again here, like a bundle's).
func (s *Service) resolveConnections(ctx context.Context, invoker string, refs []string) ([]store.Tool, []store.Binding, error) {
	if len(refs) > MaxConnections {
		return nil, nil, invalid("connections", "at most %d connections", MaxConnections)
	}
	var tools []store.Tool
	var bindings []store.Binding
	for i, ref := range refs {
		field := fmt.Sprintf("connections[%d]", i)
		c, err := s.connection(ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, invalid(field, "no connection %q", ref)
		}
		if err != nil {
			return nil, nil, err
		}
		for _, b := range bindings {
			if b.ConnectionID == c.ID {
				return nil, nil, invalid(field, "connection %q is listed twice", ref)
			}
		}
		if c.Status != store.ConnectionActive {
			return nil, nil, invalid(field, "connection %q is %s", c.Name, c.Status)
		}
		owner := ""
		if c.Kind != store.ConnectionShared {
			if invoker == "" || c.Owner != invoker {
				return nil, nil, &ForbiddenError{Message: fmt.Sprintf("%s: connection %q is personal to another member; only its owner can attach it to a run", field, c.Name)}
			}
			owner = c.Owner
		}
		if c.PhotoDigest == "" {
			return nil, nil, invalid(field, "connection %q has no photograph of its tools yet; POST /v1/connections/%s/tools/refresh first", c.Name, c.ID)
		}
		photo, err := s.st.GetPhoto(ctx, c.ID, c.PhotoDigest)
		if err != nil {
			return nil, nil, err
		}
		bindings = append(bindings, store.Binding{
			ConnectionID: c.ID, ConnectionName: c.Name, Kind: c.Kind, Owner: owner,
			Generation: c.Generation, ToolSetDigest: photo.Digest,
		})
		for _, pt := range photo.Tools {
			ft := s.freeze(capability.Tool{
				Name: BrokeredName(c.Name, pt.Name), Class: capability.Class(pt.Class),
				Description: pt.Description, InputSchema: []byte(pt.InputSchema),
			}, "connection:"+c.ID)
			if !pt.Callable {
				// The photograph's verdict stands even if today's guard
				// would differ: fail closed.
				ft.Callable, ft.Reason = false, pt.Reason
			}
			ft.ConnectionID, ft.UpstreamName, ft.ToolDigest = c.ID, pt.Name, pt.ToolDigest
			tools = append(tools, ft)
		}
	}
	return tools, bindings, nil
}

// connection finds a connection by id or name.
func (s *Service) connection(ctx context.Context, ref string) (store.Connection, error) {
	id := ref
	if !ids.Valid("con_", ref) {
		var err error
		if id, err = s.st.ConnectionIDByName(ctx, ref); err != nil {
			return store.Connection{}, err
		}
	}
	return s.st.GetConnection(ctx, id)
}
