package auth

import (
	"sync"
	"time"
)

// maxCacheEntries bounds the key cache so a flood of unknown keys cannot grow
// memory without limit.
const maxCacheEntries = 100_000

// keyCache remembers key lookups, found or not, for a short while.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
	now     func() time.Time
}

type cacheEntry struct {
	principal Principal
	err       error
	expires   time.Time
}

func newKeyCache(now func() time.Time) *keyCache {
	return &keyCache{entries: make(map[string]cacheEntry), now: now}
}

func (c *keyCache) get(token string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[token]
	if !ok || !c.now().Before(e.expires) {
		return cacheEntry{}, false
	}
	return e, true
}

func (c *keyCache) put(token string, e cacheEntry, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCacheEntries {
		now := c.now()
		for k, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCacheEntries {
			clear(c.entries)
		}
	}
	e.expires = c.now().Add(ttl)
	c.entries[token] = e
}

func (c *keyCache) drop(token string) {
	c.mu.Lock()
	delete(c.entries, token)
	c.mu.Unlock()
}

// dropTeam forgets every key of a team (its limits or models changed).
func (c *keyCache) dropTeam(teamID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.principal.TeamID == teamID {
			delete(c.entries, k)
		}
	}
}
