package auth

import (
	"testing"
	"time"
)

// A full key cache forgets its least recently used entry, not every entry:
// a flood of unknown keys cannot send the keys in use back to the table all
// at once.
func TestFullKeyCacheForgetsTheLeastRecentlyUsed(t *testing.T) {
	now := time.Now()
	c := newKeyCache(func() time.Time { return now }, 3)
	for _, tok := range []string{"in-use", "unknown-1", "unknown-2"} {
		c.put(tok, "", cacheEntry{}, time.Minute)
	}
	if _, ok := c.get("in-use"); !ok {
		t.Fatal("a fresh entry is missing")
	}
	for _, tok := range []string{"unknown-3", "unknown-4"} {
		c.put(tok, "", cacheEntry{}, time.Minute)
		if _, ok := c.get("in-use"); !ok {
			t.Fatalf("adding %s pushed out the key in use", tok)
		}
	}
	for tok, want := range map[string]bool{"in-use": true, "unknown-1": false, "unknown-2": false, "unknown-3": true, "unknown-4": true} {
		if _, ok := c.get(tok); ok != want {
			t.Errorf("%s cached: %v, want %v", tok, ok, want)
		}
	}
}
