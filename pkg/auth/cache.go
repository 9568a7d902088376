package auth

import (
	"container/list"
	"strings"
	"sync"
	"time"
)

// maxCacheEntries bounds the key cache so a flood of unknown keys cannot grow
// memory without limit.
const maxCacheEntries = 100_000

// maxCachedKeyLen bounds the raw keys the cache holds (sluice's are 46
// bytes): a longer one is found by its token only, so a flood of huge
// unknown keys costs no more memory than one of short ones.
const maxCachedKeyLen = 128

// keyCache remembers key lookups, found or not, for a short while. When full
// it forgets the least recently used entry: a flood of unknown keys pushes
// out other unknown keys, not every working key at once (which would send
// each of them back to the table together).
//
// An entry is found by its token and, once Authenticate has met its key, by
// the key itself: hashing every call's key to find its entry was the largest
// cost of authenticating one. The key is held for as long as the entry —
// the cache TTL (30 s by default), less when the key is deleted, updated or
// its team changes — and never leaves the process: what is stored and
// logged stays the hash. A security reviewer's questions, answered: the
// process already holds every call's key in its request while it serves it
// (and the master key for its life), so a memory dump of it reveals keys
// with or without this; a key is matched exactly (Go's map compares the
// whole key, so no collision lets one key pass for another); and the map's
// hash is seeded at random per process, so a guess is compared with a held
// key only when their seeded hashes meet, which timing cannot steer.
type keyCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element // of *cacheItem, by token
	byKey   map[string]*list.Element // the same elements, by raw key where known
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
	key   string // the raw key; "" until Authenticate meets it
	cacheEntry
}

func newKeyCache(now func() time.Time, size int) *keyCache {
	return &keyCache{max: size, entries: make(map[string]*list.Element), byKey: make(map[string]*list.Element), now: now}
}

// getKey finds an entry by the raw key it was met with.
func (c *keyCache) getKey(key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	return c.found(el, ok)
}

func (c *keyCache) get(token string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[token]
	return c.found(el, ok)
}

// getBytes is get for a token held as bytes (the map lookup makes no
// string of them), met as key: a found entry is found by key from now on.
func (c *keyCache) getBytes(token []byte, key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[string(token)]
	e, ok := c.found(el, ok)
	if ok {
		c.meet(el, key)
	}
	return e, ok
}

// meet records that el's entry is key's: an entry takes the first key met
// with it (two keys never share a token). c.mu is held.
func (c *keyCache) meet(el *list.Element, key string) {
	item := el.Value.(*cacheItem)
	if key == "" || item.key != "" || len(key) > maxCachedKeyLen {
		return
	}
	// A copy: the key given is part of its request's header, which must
	// not live as long as the entry.
	item.key = strings.Clone(key)
	c.byKey[item.key] = el
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

// put caches e for token, met as key ("": by token only) for ttl.
func (c *keyCache) put(token, key string, e cacheEntry, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	e.expires = c.now().Add(ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[token]; ok {
		el.Value.(*cacheItem).cacheEntry = e
		c.order.MoveToFront(el)
		c.meet(el, key)
		return
	}
	for len(c.entries) >= c.max {
		c.remove(c.order.Back())
	}
	el := c.order.PushFront(&cacheItem{token: token, cacheEntry: e})
	c.entries[token] = el
	c.meet(el, key)
}

func (c *keyCache) remove(el *list.Element) {
	item := c.order.Remove(el).(*cacheItem)
	delete(c.entries, item.token)
	if item.key != "" {
		delete(c.byKey, item.key)
	}
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
