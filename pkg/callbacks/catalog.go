package callbacks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// maxCatalogEntries bounds the cache: past it, expired entries go, then all.
const maxCatalogEntries = 100_000

// Catalog is the one place that says where a team's events go: its own
// callbacks, read from the records table and cached for a short time per
// process, and the gateway-wide ones of the config. The emitter asks it on
// every model call whether anyone listens (Listening), the delivery worker
// which callbacks an event goes to (For). A team without callbacks is
// cached too, so calls of teams that log nowhere cost one map lookup. The
// settings service drops a team's entry on every write, so in one process
// (the local mode) a change applies at once; other processes (Lambda
// containers) see it within the TTL.
type Catalog struct {
	records store.Records
	sealer  store.Sealer
	opts    CatalogOptions
	// gatewayWants says which outcomes a gateway-wide callback receives.
	gatewayWants map[string]bool

	mu      sync.Mutex
	entries map[string]catalogEntry
	loads   map[string]*catalogLoad // one read per team at a time
	gen     map[string]uint64       // bumped by Drop, so a read racing a write is not cached
}

// CatalogOptions configure a Catalog.
type CatalogOptions struct {
	// TTL is how long a team's callbacks are trusted; ≤ 0 disables caching.
	TTL time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Gateway are the gateway-wide callbacks (GatewayCallbacks).
	Gateway []Callback
	// Resolve resolves a gateway callback's var that is a secret reference
	// (secretsmanager/…); nil takes every value as it is.
	Resolve func(ctx context.Context, value string) (string, error)
}

type catalogEntry struct {
	callbacks []Callback // the gateway's, then the team's
	expires   time.Time
}

type catalogLoad struct {
	done      chan struct{}
	callbacks []Callback
	err       error
}

// NewCatalog builds a catalog over the team callback records in records,
// whose secrets sealer opens.
func NewCatalog(records store.Records, sealer store.Sealer, opts CatalogOptions) *Catalog {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Catalog{records: records, sealer: sealer, opts: opts, gatewayWants: map[string]bool{},
		entries: map[string]catalogEntry{}, loads: map[string]*catalogLoad{}, gen: map[string]uint64{}}
	for _, cb := range opts.Gateway {
		for _, status := range []string{TypeSuccess, TypeFailure} {
			if Receives(cb.Type, status) {
				c.gatewayWants[status] = true
			}
		}
	}
	return c
}

// Gateway returns the gateway-wide callbacks.
func (c *Catalog) Gateway() []Callback { return c.opts.Gateway }

// For returns the callbacks teamID's events go to: the gateway-wide ones,
// then the team's in sort-key order (secrets still sealed). The slice is
// shared: callers must not change it.
func (c *Catalog) For(ctx context.Context, teamID string) ([]Callback, error) {
	if teamID == "" {
		return c.opts.Gateway, nil
	}
	c.mu.Lock()
	if e, ok := c.entries[teamID]; ok && c.opts.Now().Before(e.expires) {
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
	team, err := c.read(ctx, teamID)
	l.err = err
	if err == nil {
		l.callbacks = append(slices.Clip(c.opts.Gateway), team...)
	}
	c.mu.Lock()
	delete(c.loads, teamID)
	if l.err == nil && c.opts.TTL > 0 && c.gen[teamID] == gen {
		if len(c.entries) >= maxCatalogEntries {
			now := c.opts.Now()
			for k, e := range c.entries {
				if !now.Before(e.expires) {
					delete(c.entries, k)
				}
			}
			if len(c.entries) >= maxCatalogEntries {
				clear(c.entries)
			}
		}
		c.entries[teamID] = catalogEntry{callbacks: l.callbacks, expires: c.opts.Now().Add(c.opts.TTL)}
	}
	c.mu.Unlock()
	close(l.done)
}

// read reads teamID's own callbacks from the table.
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

// Listening reports whether a gateway-wide callback, or one of teamID's,
// receives events of status (logevent.StatusSuccess or StatusFailure): the
// emitter's question before it publishes an event. It implements
// logevent.Listeners.
func (c *Catalog) Listening(ctx context.Context, teamID, status string) (bool, error) {
	return c.listening(ctx, teamID, status, status)
}

// ListeningEither is Listening for either status, answered from one read of
// the cache: whether a call's bodies may be logged, asked on every call.
func (c *Catalog) ListeningEither(ctx context.Context, teamID string) (bool, error) {
	return c.listening(ctx, teamID, TypeSuccess, TypeFailure)
}

// listening reports whether a callback receives events of status a or b.
func (c *Catalog) listening(ctx context.Context, teamID, a, b string) (bool, error) {
	if c.gatewayWants[a] || c.gatewayWants[b] {
		return true, nil
	}
	cbs, err := c.For(ctx, teamID)
	if err != nil {
		return false, err
	}
	for _, cb := range cbs {
		if Receives(cb.Type, a) || Receives(cb.Type, b) {
			return true, nil
		}
	}
	return false, nil
}

// Open returns every var of cb, its secrets unsealed (a gateway callback's
// secret references resolved).
func (c *Catalog) Open(ctx context.Context, cb Callback) (map[string]string, error) {
	vars := maps.Clone(cb.Vars)
	if vars == nil {
		vars = map[string]string{}
	}
	if cb.Gateway && c.opts.Resolve != nil {
		for k, v := range vars {
			r, err := c.opts.Resolve(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("resolve %s of callback %s: %w", k, cb.ID(), err)
			}
			vars[k] = r
		}
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
