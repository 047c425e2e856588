package route

import (
	"context"
	"sync"

	"github.com/fluidbox/fluidbox/shared/store"
)

// tokenCache remembers runs' token hashes, which never change, so a runner's
// requests authenticate without a read after the first.
type tokenCache struct {
	mu     sync.Mutex
	hashes map[string]string
}

const maxCachedTokens = 10000

func (c *tokenCache) hash(ctx context.Context, st *store.Store, runID string) (string, error) {
	c.mu.Lock()
	h, ok := c.hashes[runID]
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	head, err := st.GetHead(ctx, runID)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hashes == nil || len(c.hashes) >= maxCachedTokens {
		c.hashes = map[string]string{}
	}
	c.hashes[runID] = head.TokenHash
	return head.TokenHash, nil
}
