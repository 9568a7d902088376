package auth

import (
	"container/list"
	"sync"
	"time"
)

// maxCacheEntries bounds the key cache so a flood of unknown keys cannot grow
// memory without limit.
const maxCacheEntries = 100_000

// keyCache remembers key lookups, found or not, for a short while. When full
// it forgets the least recently used entry: a flood of unknown keys pushes
// out other unknown keys, not every working key at once (which would send
// each of them back to the table together).
type keyCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element // of *cacheItem
	order   list.List                // most recently used first
	now     func() time.Time
}

type cacheEntry struct {
	principal Principal
	err       error
	expires   time.Time
}

type cacheItem struct {
	token string
	cacheEntry
}

func newKeyCache(now func() time.Time, size int) *keyCache {
	return &keyCache{max: size, entries: make(map[string]*list.Element), now: now}
}

func (c *keyCache) get(token string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[token]
	return c.found(el, ok)
}

// getBytes is get for a token held as bytes (the map lookup makes no
// string of them).
func (c *keyCache) getBytes(token []byte) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[string(token)]
	return c.found(el, ok)
}

// found is get's answer for the lookup's result. c.mu is held.
func (c *keyCache) found(el *list.Element, ok bool) (cacheEntry, bool) {
	if !ok {
		return cacheEntry{}, false
	}
	item := el.Value.(*cacheItem)
	if !c.now().Before(item.expires) {
		c.remove(el)
		return cacheEntry{}, false
	}
	c.order.MoveToFront(el)
	return item.cacheEntry, true
}

func (c *keyCache) put(token string, e cacheEntry, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	e.expires = c.now().Add(ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[token]; ok {
		el.Value.(*cacheItem).cacheEntry = e
		c.order.MoveToFront(el)
		return
	}
	for len(c.entries) >= c.max {
		c.remove(c.order.Back())
	}
	c.entries[token] = c.order.PushFront(&cacheItem{token: token, cacheEntry: e})
}

func (c *keyCache) remove(el *list.Element) {
	delete(c.entries, c.order.Remove(el).(*cacheItem).token)
}

func (c *keyCache) drop(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[token]; ok {
		c.remove(el)
	}
}

// dropTeam forgets every key of a team (its limits or models changed).
func (c *keyCache) dropTeam(teamID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, el := range c.entries {
		if el.Value.(*cacheItem).principal.TeamID == teamID {
			c.remove(el)
		}
	}
}
