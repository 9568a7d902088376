package auth

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// countingRecords counts key lookups so cache behaviour can be checked.
type countingRecords struct {
	store.Records
	mu   sync.Mutex
	gets int
}

func (c *countingRecords) Get(ctx context.Context, k store.Key) (store.Record, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Records.Get(ctx, k)
}

func (c *countingRecords) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.gets }

func newTestService(t *testing.T) (*Service, *countingRecords, *clock) {
	t.Helper()
	db, err := local.OpenDB(filepath.Join(t.TempDir(), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	recs, err := local.NewRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingRecords{Records: recs}
	clk := &clock{now: time.Now()}
	s, err := NewService(counting, local.NewLimiter(), "sk-master", Options{
		CacheTTL: 30 * time.Second, NegativeCacheTTL: 5 * time.Second, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, counting, clk
}

func status(err error) int {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func int64p(v int64) *int64 { return &v }

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	s, recs, clk := newTestService(t)
	if _, err := s.CreateTeam(ctx, NewTeam{TeamAlias: "a"}, "team-a"); err != nil {
		t.Fatal(err)
	}
	gen, err := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-a", Duration: "1h"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if gen.Token != Token(gen.Key) || len(gen.Key) != 46 {
		t.Fatalf("generated %+v", gen)
	}
	// Only the hash is stored.
	rec, err := recs.Records.Get(ctx, keyRecordKey(gen.Token))
	if err != nil {
		t.Fatal(err)
	}
	if containsBytes(rec.Body, gen.Key) {
		t.Fatal("the raw key is stored")
	}

	p, err := s.Authenticate(ctx, gen.Key)
	if err != nil || p.TeamID != "team-a" || p.Admin || p.Team == nil {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	before := recs.count()
	for range 10 {
		if _, err := s.Authenticate(ctx, gen.Key); err != nil {
			t.Fatal(err)
		}
	}
	if recs.count() != before {
		t.Errorf("cached lookups hit the store %d times", recs.count()-before)
	}
	clk.Add(31 * time.Second)
	s.Authenticate(ctx, gen.Key)
	if recs.count() == before {
		t.Error("the cache did not expire after its TTL")
	}

	// Expiry: past the key's duration it is refused even if cached.
	clk.Add(time.Hour)
	if _, err := s.Authenticate(ctx, gen.Key); status(err) != 401 {
		t.Errorf("expired key: %v", err)
	}
}

func TestNegativeCache(t *testing.T) {
	ctx := context.Background()
	s, recs, clk := newTestService(t)
	for range 5 {
		if _, err := s.Authenticate(ctx, "sk-nope"); status(err) != 401 {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if recs.count() != 1 {
		t.Errorf("unknown key looked up %d times, want 1", recs.count())
	}
	clk.Add(6 * time.Second)
	s.Authenticate(ctx, "sk-nope")
	if recs.count() != 2 {
		t.Errorf("negative cache did not expire")
	}
}

func TestDeleteDropsCache(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestService(t)
	s.CreateTeam(ctx, NewTeam{}, "team-a")
	gen, _ := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-a"}, "admin")
	if _, err := s.Authenticate(ctx, gen.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteKeys(ctx, []string{gen.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, gen.Key); status(err) != 401 {
		t.Errorf("deleted key still authenticates: %v", err)
	}
}

func TestMasterKey(t *testing.T) {
	s, _, _ := newTestService(t)
	p, err := s.Authenticate(context.Background(), "sk-master")
	if err != nil || !p.Admin || p.TeamID != AdminTeam {
		t.Errorf("master = %+v, %v", p, err)
	}
	if _, err := s.Authenticate(context.Background(), ""); status(err) != 401 {
		t.Errorf("empty key: %v", err)
	}
	if _, err := NewService(nil, nil, "", Options{}); err == nil {
		t.Error("a service without a master key was built")
	}
}

func TestAdmitLimits(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestService(t)
	s.CreateTeam(ctx, NewTeam{RPMLimit: int64p(5)}, "team-a")
	s.CreateTeam(ctx, NewTeam{}, "team-b")
	principal := func(req NewKeyRequest) Principal {
		gen, err := s.GenerateKey(ctx, req, "admin")
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Authenticate(ctx, gen.Key)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := principal(NewKeyRequest{TeamID: "team-a", RPMLimit: int64p(3)})
	for i := range 3 {
		if err := s.Admit(ctx, p); err != nil {
			t.Fatalf("request %d refused: %v", i+1, err)
		}
	}
	var e *api.Error
	if err := s.Admit(ctx, p); !errors.As(err, &e) || e.Status != 429 || e.Type != api.TypeRequests || e.RetryAfter <= 0 {
		t.Fatalf("4th request: %v", err)
	}

	// A second key of the team shares the team's 5 rpm: 2 are left.
	p2 := principal(NewKeyRequest{TeamID: "team-a"})
	n := 0
	for s.Admit(ctx, p2) == nil && n < 10 {
		n++
	}
	if n != 2 {
		t.Errorf("team rpm admitted %d more, want 2", n)
	}

	// Tokens: a call that used the whole budget makes the next one wait.
	p3 := principal(NewKeyRequest{TeamID: "team-b", TPMLimit: int64p(100)})
	if err := s.Admit(ctx, p3); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokens(ctx, p3, 150); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(ctx, p3); !errors.As(err, &e) || e.Status != 429 || e.Type != api.TypeTokens {
		t.Fatalf("over the token budget: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "15m": 15 * time.Minute, "2h": 2 * time.Hour, "30d": 30 * 24 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "d", "0d", "-1d", "1w", "1.5h", "99999999999999d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", in)
		}
	}
}

func TestPrincipalAllowsModel(t *testing.T) {
	p := Principal{Key: &KeyInfo{Models: []string{"a", "b"}}, Team: &Team{Models: []string{"b", "c"}}}
	for model, want := range map[string]bool{"a": false, "b": true, "c": false, "d": false} {
		if got := p.AllowsModel(model); got != want {
			t.Errorf("AllowsModel(%q) = %v", model, got)
		}
	}
	if !(Principal{Admin: true}).AllowsModel("anything") || !(Principal{Key: &KeyInfo{}, Team: &Team{}}).AllowsModel("x") {
		t.Error("empty lists must allow every model")
	}
}

func containsBytes(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestMasterKeyResolvedOnFirstUse(t *testing.T) {
	ctx := context.Background()
	calls := 0
	fail := true
	s, err := NewService(nil, nil, "", Options{ResolveMasterKey: func(context.Context) (string, error) {
		calls++
		if fail {
			return "", errors.New("secrets manager unavailable")
		}
		return "sk-lazy", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatal("the master key was read before any request needed it")
	}
	if _, err := s.Authenticate(ctx, "sk-lazy"); status(err) != 503 {
		t.Fatalf("unreadable master key: %v, want 503", err)
	}
	fail = false
	for range 3 {
		p, err := s.Authenticate(ctx, "sk-lazy")
		if err != nil || !p.Admin {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	if calls != 2 {
		t.Errorf("resolved %d times, want 2 (one failure, then once)", calls)
	}
}

func TestTeamStorageQuota(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestService(t)
	if _, err := s.CreateTeam(ctx, NewTeam{MaxStorageBytes: int64p(-1)}, "team-neg"); status(err) != 400 || api.AsError(err).Param != "max_storage_bytes" {
		t.Fatalf("a negative max_storage_bytes: %v; want 400 naming it", err)
	}
	created, err := s.CreateTeam(ctx, NewTeam{MaxStorageBytes: int64p(1 << 30)}, "team-q")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Team(ctx, Principal{Admin: true}, "team-q")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, info); diff != "" || info.MaxStorageBytes == nil || *info.MaxStorageBytes != 1<<30 {
		t.Fatalf("team info (-created +read):\n%s; max_storage_bytes %v", diff, info.MaxStorageBytes)
	}
	// The team's keys carry it to the services that enforce it.
	gen, err := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-q"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, gen.Key)
	if err != nil || p.Team.MaxStorageBytes == nil || *p.Team.MaxStorageBytes != 1<<30 {
		t.Fatalf("principal's team: %+v, %v", p.Team, err)
	}
}

func TestRestrictsModels(t *testing.T) {
	for _, tc := range []struct {
		name      string
		p         Principal
		restricts bool
	}{
		{"admin", Principal{Admin: true}, false},
		{"no lists", Principal{Key: &KeyInfo{}, Team: &Team{}}, false},
		{"key list", Principal{Key: &KeyInfo{Models: []string{"a"}}, Team: &Team{}}, true},
		{"team list", Principal{Key: &KeyInfo{}, Team: &Team{Models: []string{"a"}}}, true},
		{"wildcards", Principal{Key: &KeyInfo{Models: []string{"a", "*"}}, Team: &Team{Models: []string{"*"}}}, false},
		{"no team", Principal{Key: &KeyInfo{Models: []string{}}}, false},
	} {
		if got := tc.p.RestrictsModels(); got != tc.restricts {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

// A cached key is checked without allocating: its token is hashed and
// hex-encoded on the stack and found in the cache by those bytes, and the
// principal carried by the request is one allocation (its context layer).
func TestAuthenticateCachedKeyAllocations(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestService(t)
	if _, err := s.CreateTeam(ctx, NewTeam{TeamAlias: "a"}, "team-a"); err != nil {
		t.Fatal(err)
	}
	gen, err := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-a"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, gen.Key); err != nil { // caches it
		t.Fatal(err)
	}
	var p Principal
	if allocs := testing.AllocsPerRun(100, func() {
		if p, err = s.Authenticate(ctx, gen.Key); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%.0f allocations to authenticate a cached key, want 0", allocs)
	}
	var pctx context.Context
	if allocs := testing.AllocsPerRun(100, func() { pctx = WithPrincipal(ctx, p) }); allocs != 1 {
		t.Errorf("%.0f allocations to carry a principal, want 1", allocs)
	}
	if got := FromContext(pctx); got.TeamID != "team-a" || got.KeyToken() != gen.Token {
		t.Errorf("FromContext = %+v", got)
	}
}
