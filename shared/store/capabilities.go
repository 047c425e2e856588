package store

import (
	"context"
	"errors"
	"fmt"
)

// Capability is a stored capability bundle. Tools is the bundle's tools as
// JSON, kept opaque here.
type Capability struct {
	ID        string `dynamodbav:"id"`
	Name      string `dynamodbav:"name"`
	Digest    string `dynamodbav:"digest"`
	Tools     string `dynamodbav:"tools"`
	CreatedAt string `dynamodbav:"created_at"`
}

// ErrNameTaken: a capability with that name exists.
var ErrNameTaken = fmt.Errorf("store: name taken: %w", ErrExists)

type capabilityItem struct {
	Capability
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

type nameItem struct {
	ID string `dynamodbav:"id"`
}

// PutCapability stores a new bundle and claims its name.
func (s *Store) PutCapability(ctx context.Context, c Capability) error {
	err := s.putClaimed(ctx, "put capability "+c.ID, "CAP#"+c.ID, capabilityItem{Capability: c, GSI1PK: "CAP", GSI1SK: c.CreatedAt + "#" + c.ID}, "CAPNAME#"+c.Name, c.ID)
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("store: capability %q: %w", c.Name, ErrNameTaken)
	}
	return err
}

// GetCapability reads a bundle by id.
func (s *Store) GetCapability(ctx context.Context, id string) (Capability, error) {
	var c Capability
	err := s.get(ctx, "CAP#"+id, "HEAD", &c)
	return c, err
}

// CapabilityIDByName resolves a bundle's name.
func (s *Store) CapabilityIDByName(ctx context.Context, name string) (string, error) {
	var n nameItem
	err := s.get(ctx, "CAPNAME#"+name, "HEAD", &n)
	return n.ID, err
}

// ListCapabilities lists stored bundles, oldest first.
func (s *Store) ListCapabilities(ctx context.Context) ([]Capability, error) {
	return listIndex[Capability](ctx, s, indexQuery{op: "list capabilities", item: "capability", pk: "CAP"})
}
