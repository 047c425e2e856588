package route

import (
	"context"
	"sync"

	"github.com/fluidbox/fluidbox/shared/store"
)

// tokenCache remembers runs' token hashes, which never change once issued,
// so a runner's requests authenticate without a read after the first. A
// triggered run's hashes change once, when its tokens are issued, so they
// are not remembered before that.
type tokenCache struct {
	mu     sync.Mutex
	hashes map[string]runHashes
}

// runHashes are a run's session and runner token hashes.
type runHashes struct{ session, runner string }

const maxCachedTokens = 10000

func (h runHashes) sessionHash() string { return h.session }
func (h runHashes) runnerHash() string  { return h.runner }

func (c *tokenCache) get(ctx context.Context, readHead func(context.Context, string) (store.Head, error), runID string) (runHashes, error) {
	c.mu.Lock()
	h, ok := c.hashes[runID]
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	head, err := readHead(ctx, runID)
	if err != nil {
		return runHashes{}, err
	}
	h = runHashes{session: head.TokenHash, runner: head.RunnerTokenHash}
	if head.TokensPending() {
		return h, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hashes == nil || len(c.hashes) >= maxCachedTokens {
		c.hashes = map[string]runHashes{}
	}
	c.hashes[runID] = h
	return h, nil
}
