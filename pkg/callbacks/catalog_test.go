package callbacks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// countingQueries counts partition reads.
type countingQueries struct {
	store.Records
	n atomic.Int64
}

func (c *countingQueries) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.n.Add(1)
	return c.Records.Query(ctx, q)
}

func TestCatalogCachesTeamsWithoutCallbacks(t *testing.T) {
	h := newHarness(t)
	counting := &countingQueries{Records: h.records}
	cat := NewCatalog(counting, h.sealer, CatalogOptions{TTL: time.Minute, Now: h.clock.Now})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if on, err := cat.Listening(ctx, "team-a", TypeSuccess); err != nil || on {
				t.Errorf("Listening = %v, %v; want false", on, err)
			}
		})
	}
	wg.Wait()
	if n := counting.n.Load(); n != 1 {
		t.Errorf("%d reads for 50 concurrent lookups of one team, want 1", n)
	}
	h.clock.Add(time.Minute)
	if _, err := cat.Listening(ctx, "team-a", TypeSuccess); err != nil {
		t.Fatal(err)
	}
	if n := counting.n.Load(); n != 2 {
		t.Errorf("%d reads after the TTL, want 2", n)
	}
}

func TestCatalogSeesChangesAtOnceLocallyAndWithinTTLElsewhere(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// Another process (a Lambda container) has its own catalog.
	other := NewCatalog(h.records, h.sealer, CatalogOptions{TTL: 30 * time.Second, Now: h.clock.Now})
	for _, c := range []*Catalog{h.catalog, other} {
		if on, _ := c.Listening(ctx, "team-a", TypeSuccess); on {
			t.Fatal("listening before any callback")
		}
	}
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatal(err)
	}
	if on, err := h.catalog.Listening(ctx, "team-a", TypeSuccess); err != nil || !on {
		t.Errorf("the writing process: Listening = %v, %v right after the add, want true", on, err)
	}
	if on, _ := other.Listening(ctx, "team-a", TypeSuccess); on {
		t.Error("another process saw the change before its TTL (test assumption broken)")
	}
	h.clock.Add(30 * time.Second)
	if on, err := other.Listening(ctx, "team-a", TypeSuccess); err != nil || !on {
		t.Errorf("another process after the TTL: Listening = %v, %v, want true", on, err)
	}
}

func TestListeningFollowsCallbackTypes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeFailure), ""); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]bool{"success": false, "failure": true} {
		if got, err := h.catalog.Listening(ctx, "team-a", status); err != nil || got != want {
			t.Errorf("Listening(%s) = %v, %v; want %v", status, got, err, want)
		}
	}
	if got, _ := h.catalog.Listening(ctx, "team-b", "failure"); got {
		t.Error("team-b listens without callbacks")
	}
}

// ListeningEither is Listening for either status, in one question: a team
// with a failure callback only listens, one without none, and a gateway
// callback of either type has every team listen.
func TestListeningEitherIsListeningForEitherStatus(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeFailure), ""); err != nil {
		t.Fatal(err)
	}
	for team, want := range map[string]bool{"team-a": true, "team-b": false} {
		if got, err := h.catalog.ListeningEither(ctx, team); err != nil || got != want {
			t.Errorf("ListeningEither(%s) = %v, %v; want %v", team, got, err, want)
		}
	}
	for _, typ := range []string{TypeSuccess, TypeFailure} {
		gw := NewCatalog(h.records, h.sealer, CatalogOptions{Gateway: []Callback{{Name: Langfuse, Type: typ, Gateway: true}}})
		if got, err := gw.ListeningEither(ctx, "team-b"); err != nil || !got {
			t.Errorf("a gateway %s callback: ListeningEither = %v, %v; want true", typ, got, err)
		}
	}
}
