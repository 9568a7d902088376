package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
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

// harness is a settings service on the embedded store with two teams, a
// key of each, and the master key.
type harness struct {
	svc     *Service
	auth    *auth.Service
	records store.Records
	sealer  store.Sealer
	catalog *Catalog
	clock   *clock
	admin   auth.Principal
	teamA   auth.Principal // a key of team-a
	teamB   auth.Principal // a key of team-b
	saDir   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	db, err := local.OpenDB(filepath.Join(dir, "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	records, err := local.NewRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := local.OpenSealer(filepath.Join(dir, "sealer.key"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	a, err := auth.NewService(records, local.NewLimiter(), "sk-master", auth.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{auth: a, records: records, sealer: sealer, clock: clk, saDir: filepath.Join(dir, "accounts")}
	ctx := context.Background()
	if h.admin, err = a.Authenticate(ctx, "sk-master"); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []struct {
		id string
		p  *auth.Principal
	}{{"team-a", &h.teamA}, {"team-b", &h.teamB}} {
		if _, err := a.CreateTeam(ctx, auth.NewTeam{TeamID: tp.id}, ""); err != nil {
			t.Fatal(err)
		}
		k, err := a.GenerateKey(ctx, auth.NewKeyRequest{TeamID: tp.id, KeyAlias: tp.id + "-key"}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if *tp.p, err = a.Authenticate(ctx, k.Key); err != nil {
			t.Fatal(err)
		}
	}
	guard, err := NewGuard([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	// Name resolution is the test's: no test depends on a DNS server.
	guard.lookup = fakeLookup
	h.catalog = NewCatalog(records, sealer, CatalogOptions{TTL: 30 * time.Second, Now: clk.Now})
	h.svc, err = NewService(Deps{Records: records, Sealer: sealer, Teams: a, Catalog: h.catalog, Guard: guard,
		Accounts: NewServiceAccounts(h.saDir, guard), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fakeLookup resolves the names tests use.
func fakeLookup(_ context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "cloud.langfuse.com", "api.smith.langchain.com", "oauth2.googleapis.com", "public.example":
		return []netip.Addr{netip.MustParseAddr("203.0.113.10")}, nil
	case "metadata.internal":
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	case "intranet.example":
		return []netip.Addr{netip.MustParseAddr("203.0.113.11"), netip.MustParseAddr("10.1.2.3")}, nil
	}
	return nil, errors.New("no such host")
}

// vars builds callback_vars from strings.
func vars(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		b, _ := json.Marshal(kv[i+1])
		m[kv[i]] = b
	}
	return m
}

func langfuseCallback(typ string) AddCallback {
	return AddCallback{CallbackName: Langfuse, CallbackType: typ, CallbackVars: vars(
		VarLangfusePublicKey, "pk-lf-public", VarLangfuseSecretKey, "sk-lf-very-secret-1234", VarLangfuseHost, "https://cloud.langfuse.com/")}
}

// apiErr returns err's status and param.
func apiErr(err error) (int, string) {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status, e.Param
	}
	return 0, ""
}
