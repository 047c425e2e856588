package schemaguard

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	const schemas, goroutines, rounds = 8, 64, 50
	type entry struct {
		digest string
		raw    []byte
	}
	entries := make([]entry, schemas)
	for i := range entries {
		raw := []byte(fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer","maximum":%d}},"required":["n"]}`, i))
		d, err := Digest(raw)
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = entry{d, raw}
	}
	c := NewCache(schemas / 2) // smaller than the working set: eviction races too
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				i := (g + r) % schemas
				s, err := c.Get(entries[i].digest, entries[i].raw)
				if err != nil {
					errs <- err
					return
				}
				if s.Digest() != entries[i].digest {
					errs <- fmt.Errorf("Get(%d) returned schema %s", i, s.Digest())
					return
				}
				if err := s.Validate(map[string]any{"n": float64(i)}); err != nil {
					errs <- err
					return
				}
				if err := s.Validate(map[string]any{"n": float64(i + 1)}); err == nil {
					errs <- fmt.Errorf("schema %d accepted %d", i, i+1)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.Len(); n > schemas/2 {
		t.Errorf("Len() = %d, want <= %d", n, schemas/2)
	}
}

func TestCacheSameDigestCompilesOnce(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"type":"string"}`)
	d, _ := Digest(raw)
	c := NewCache(4)
	var wg sync.WaitGroup
	got := make([]*Schema, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Get(d, raw)
		}()
	}
	wg.Wait()
	for i, s := range got {
		if s == nil || s != got[0] {
			t.Fatalf("Get #%d = %p, want the one shared schema %p", i, s, got[0])
		}
	}
}

func TestCacheDigestMismatch(t *testing.T) {
	t.Parallel()
	a, b := []byte(`{"type":"string"}`), []byte(`{"type":"number"}`)
	da, _ := Digest(a)
	c := NewCache(4)
	if _, err := c.Get(da, b); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Get(digest of a, b) = %v, want ErrDigestMismatch", err)
	}
	if _, err := c.Get(da, []byte(`{`)); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Get(digest of a, not JSON) = %v, want ErrDigestMismatch", err)
	}
	if c.Len() != 0 {
		t.Errorf("a mismatch was cached: Len() = %d", c.Len())
	}
	s, err := c.Get(da, a)
	if err != nil || s.Digest() != da {
		t.Errorf("Get(digest of a, a) after mismatch = %v, %v", s, err)
	}
}

func TestCacheRejectionIsCached(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"$ref":"https://evil.example/s.json"}`)
	d, _ := Digest(raw)
	c := NewCache(4)
	for i := 0; i < 2; i++ {
		var re *RejectError
		if _, err := c.Get(d, raw); !errors.As(err, &re) {
			t.Fatalf("Get #%d = %v, want *RejectError", i, err)
		}
	}
	if c.Len() != 1 {
		t.Errorf("Len() = %d, want the rejection cached", c.Len())
	}
	if NewCache(0).max != 1 {
		t.Error("NewCache(0) is not bounded to 1")
	}
	var nilCache *Cache
	if _, err := nilCache.Get(d, raw); err == nil {
		t.Error("nil Cache returned no error")
	}
}
