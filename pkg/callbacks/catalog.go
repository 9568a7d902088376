package callbacks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// maxCatalogEntries bounds the cache: past it, expired entries go, then all.
const maxCatalogEntries = 100_000

// Catalog serves a team's callbacks from the records table, cached for a
// short time per process: the emitter asks it on every model call whether
// anyone listens, the delivery worker which destinations an event goes to.
// A team without callbacks is cached too, so calls of teams that log
// nowhere cost one map lookup. The settings service drops a team's entry on
// every write, so in one process (the local mode) a change applies at once;
// other processes (Lambda containers) see it within the TTL.
type Catalog struct {
	records store.Records
	sealer  store.Sealer
	ttl     time.Duration
	now     func() time.Time

	mu      sync.Mutex
	entries map[string]catalogEntry
	loads   map[string]*catalogLoad // one read per team at a time
	gen     map[string]uint64       // bumped by Drop, so a read racing a write is not cached
}

type catalogEntry struct {
	callbacks []Callback
	expires   time.Time
}

type catalogLoad struct {
	done      chan struct{}
	callbacks []Callback
	err       error
}

// NewCatalog builds a catalog; ttl ≤ 0 disables caching. now may be nil.
func NewCatalog(records store.Records, sealer store.Sealer, ttl time.Duration, now func() time.Time) *Catalog {
	if now == nil {
		now = time.Now
	}
	return &Catalog{records: records, sealer: sealer, ttl: ttl, now: now,
		entries: map[string]catalogEntry{}, loads: map[string]*catalogLoad{}, gen: map[string]uint64{}}
}

// Team returns teamID's callbacks in sort-key order (secrets still sealed).
// The slice is shared: callers must not change it.
func (c *Catalog) Team(ctx context.Context, teamID string) ([]Callback, error) {
	c.mu.Lock()
	if e, ok := c.entries[teamID]; ok && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.callbacks, nil
	}
	l, loading := c.loads[teamID]
	if !loading {
		l = &catalogLoad{done: make(chan struct{})}
		c.loads[teamID] = l
		gen := c.gen[teamID]
		go c.load(teamID, gen, l)
	}
	c.mu.Unlock()
	select {
	case <-l.done:
		return l.callbacks, l.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// load reads a team's callbacks on its own deadline, so a caller that gives
// up does not fail the read for the others waiting on it.
func (c *Catalog) load(teamID string, gen uint64, l *catalogLoad) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.callbacks, l.err = c.read(ctx, teamID)
	c.mu.Lock()
	delete(c.loads, teamID)
	if l.err == nil && c.ttl > 0 && c.gen[teamID] == gen {
		if len(c.entries) >= maxCatalogEntries {
			now := c.now()
			for k, e := range c.entries {
				if !now.Before(e.expires) {
					delete(c.entries, k)
				}
			}
			if len(c.entries) >= maxCatalogEntries {
				clear(c.entries)
			}
		}
		c.entries[teamID] = catalogEntry{callbacks: l.callbacks, expires: c.now().Add(c.ttl)}
	}
	c.mu.Unlock()
	close(l.done)
}

func (c *Catalog) read(ctx context.Context, teamID string) ([]Callback, error) {
	var out []Callback
	q := store.Query{PK: teamPK(teamID), SKPrefix: callbackPrefix, Limit: 100}
	for {
		page, err := c.records.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("read callbacks of team %s: %w", teamID, err)
		}
		for _, rec := range page.Records {
			cb, err := decodeCallback(teamID, rec.Key.SK, rec.Version, rec.Body)
			if err != nil {
				return nil, err
			}
			out = append(out, cb)
		}
		if !page.More || len(page.Records) == 0 {
			return out, nil
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
}

// Drop forgets a team's entry: its callbacks changed.
func (c *Catalog) Drop(teamID string) {
	c.mu.Lock()
	delete(c.entries, teamID)
	c.gen[teamID]++
	c.mu.Unlock()
}

// Listening reports whether a callback of teamID receives events of status
// (logevent.StatusSuccess or StatusFailure): the emitter's question before
// it publishes an event.
func (c *Catalog) Listening(ctx context.Context, teamID, status string) (bool, error) {
	cbs, err := c.Team(ctx, teamID)
	if err != nil {
		return false, err
	}
	for _, cb := range cbs {
		if Receives(cb.Type, status) {
			return true, nil
		}
	}
	return false, nil
}

// Open returns every var of cb, its secrets unsealed.
func (c *Catalog) Open(ctx context.Context, cb Callback) (map[string]string, error) {
	vars := maps.Clone(cb.Vars)
	if vars == nil {
		vars = map[string]string{}
	}
	if len(cb.Sealed) == 0 {
		return vars, nil
	}
	plain, err := c.sealer.Open(ctx, cb.Sealed, SealContext(cb.TeamID, cb.Name, cb.Type))
	if err != nil {
		return nil, fmt.Errorf("open secrets of callback %s of team %s: %w", cb.ID(), cb.TeamID, err)
	}
	var secrets map[string]string
	if err := json.Unmarshal(plain, &secrets); err != nil {
		return nil, fmt.Errorf("decode secrets of callback %s of team %s: %w", cb.ID(), cb.TeamID, err)
	}
	maps.Copy(vars, secrets)
	return vars, nil
}
