package auth

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An entry met with its raw key is found by that key, and forgetting it
// (dropped, pushed out, expired) forgets it by key too: a key is never held
// past its entry.
func TestKeyCacheHoldsAKeyOnlyWithItsEntry(t *testing.T) {
	now := time.Now()
	c := newKeyCache(func() time.Time { return now }, 2)
	c.put("tok-a", "sk-a", cacheEntry{principal: Principal{TeamID: "a"}}, time.Minute)
	if e, ok := c.getKey("sk-a"); !ok || e.principal.TeamID != "a" {
		t.Fatalf("getKey(sk-a) = %+v, %v; want team a", e, ok)
	}

	c.drop("tok-a")
	if _, ok := c.getKey("sk-a"); ok || len(c.byKey) != 0 {
		t.Fatalf("a dropped entry is still found by key (%d held)", len(c.byKey))
	}

	for _, k := range []string{"a", "b", "c"} { // c pushes a out
		c.put("tok-"+k, "sk-"+k, cacheEntry{}, time.Minute)
	}
	if _, ok := c.getKey("sk-a"); ok || len(c.byKey) != len(c.entries) {
		t.Fatalf("a pushed-out entry is still found by key (%d by key, %d by token)", len(c.byKey), len(c.entries))
	}

	now = now.Add(time.Hour)
	if _, ok := c.getKey("sk-b"); ok {
		t.Fatal("an expired entry is found by key")
	}
	if _, ok := c.byKey["sk-b"]; ok {
		t.Fatal("an expired entry's key is still held")
	}
}

// An entry cached by token only (PrincipalOf) is met with its key by the
// next Authenticate-style lookup; a key too long to hold is found by token
// only.
func TestKeyCacheMeetsKeys(t *testing.T) {
	now := time.Now()
	c := newKeyCache(func() time.Time { return now }, 10)
	var tok token
	tok.of("sk-met")
	c.put(string(tok[:]), "", cacheEntry{}, time.Minute)
	if _, ok := c.getKey("sk-met"); ok {
		t.Fatal("an entry cached by token is found by a key never met")
	}
	if _, ok := c.getBytes(tok[:], "sk-met"); !ok {
		t.Fatal("getBytes missed a cached token")
	}
	if _, ok := c.getKey("sk-met"); !ok {
		t.Fatal("an entry met with its key is not found by it")
	}

	long := "sk-" + strings.Repeat("x", maxCachedKeyLen)
	tok.of(long)
	c.put(string(tok[:]), long, cacheEntry{}, time.Minute)
	if _, ok := c.getKey(long); ok {
		t.Error("a key longer than maxCachedKeyLen is held")
	}
	if _, ok := c.getBytes(tok[:], long); !ok {
		t.Error("a long key's entry is not found by its token")
	}
}

// The master key is never held by the cache: every call with it reaches
// the constant-time comparison with its hash.
func TestMasterKeyNotHeldByCache(t *testing.T) {
	s, _, _ := newTestService(t)
	for range 2 {
		if p, err := s.Authenticate(context.Background(), "sk-master"); err != nil || !p.Admin {
			t.Fatalf("master key: %+v, %v", p, err)
		}
	}
	if _, ok := s.cache.getKey("sk-master"); ok {
		t.Error("the master key is held by the key cache")
	}
}

// A key authenticated (so cached by key) sees its team's update at once:
// the update forgets it by key as well as by token.
func TestTeamUpdateReachesAKeyCachedByKey(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestService(t)
	if _, err := s.CreateTeam(ctx, NewTeam{}, "team-a"); err != nil {
		t.Fatal(err)
	}
	gen, err := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-a"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, gen.Key); err != nil {
		t.Fatal(err)
	}
	models := []string{"gpt-4o"}
	if _, err := s.UpdateTeam(ctx, TeamUpdate{TeamID: "team-a", Models: Optional[[]string]{Set: true, Value: &models}}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, gen.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Team.Models; len(got) != 1 || got[0] != "gpt-4o" {
		t.Errorf("after the team's update, its models = %v, want [gpt-4o]", got)
	}
}
