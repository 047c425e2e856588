package schemaguard

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
)

// Cache holds compiled schemas by digest, at most max of them, evicting the
// least recently used. It is safe for concurrent use; concurrent misses on
// one digest compile once. Rejections are cached too: they are a function
// of the digest.
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recently used first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	digest string
	ready  chan struct{} // closed once schema/err are set
	schema *Schema
	err    error
}

// NewCache returns a cache of at most max compiled schemas (at least 1).
func NewCache(max int) *Cache {
	if max < 1 {
		max = 1
	}
	return &Cache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the compiled schema for digest, compiling schema on a miss.
// On a miss the schema's own digest must equal digest, so a caller cannot
// file one schema under another's digest; on a hit the cached schema is
// returned, since it is the schema that digest names.
func (c *Cache) Get(digest string, schema []byte) (*Schema, error) {
	if c == nil {
		return nil, fmt.Errorf("schemaguard: nil cache")
	}
	c.mu.Lock()
	if el, ok := c.byKey[digest]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.mu.Unlock()
		<-e.ready
		return e.schema, e.err
	}
	e := &cacheEntry{digest: digest, ready: make(chan struct{})}
	c.byKey[digest] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.byKey, old.Value.(*cacheEntry).digest)
	}
	c.mu.Unlock()

	e.schema, e.err = load(digest, schema)
	close(e.ready)
	if errors.Is(e.err, ErrDigestMismatch) {
		c.forget(e) // wrong bytes say nothing about the digest: do not cache
	}
	return e.schema, e.err
}

func (c *Cache) forget(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.digest]; ok && el.Value.(*cacheEntry) == e {
		c.order.Remove(el)
		delete(c.byKey, e.digest)
	}
}

// Len reports how many digests the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// ErrDigestMismatch says the schema handed to Cache.Get is not the schema
// its digest names.
var ErrDigestMismatch = errors.New("schemaguard: schema does not match its digest")

func load(digest string, schema []byte) (*Schema, error) {
	d, err := Digest(schema)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrDigestMismatch, digest, err)
	}
	if d != digest {
		return nil, fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, d, digest)
	}
	return Compile(schema)
}
