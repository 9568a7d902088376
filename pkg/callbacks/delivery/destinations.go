package delivery

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/callbacks/gcsbucket"
	"github.com/sluice-gateway/sluice/pkg/callbacks/langfuse"
	"github.com/sluice-gateway/sluice/pkg/callbacks/langsmith"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
)

// Destination sends events to one configured callback, in as few requests
// as it allows, and returns one error per event (nil: delivered;
// callbacks.IsPermanent: retrying cannot help).
type Destination interface {
	Send(ctx context.Context, events []*logevent.Event) []error
}

// Opener builds the destination of a callback from its opened vars.
type Opener func(ctx context.Context, cb callbacks.Callback, vars map[string]string) (Destination, error)

// OpenerDeps is what the destinations are opened with.
type OpenerDeps struct {
	// Client carries a team's callbacks: the Guard's (destinations a team
	// names must not reach private networks).
	Client *http.Client
	// GatewayClient carries the gateway-wide callbacks, which the operator
	// configured.
	GatewayClient *http.Client
	// Accounts resolves a team's gcs_path_service_account.
	Accounts *callbacks.ServiceAccounts
	// GCSEndpoint is the GCS JSON API (gcsbucket.Endpoint).
	GCSEndpoint string
}

// langfuseBodiesKept is how many Langfuse request bodies an opener keeps for
// reuse: one per request in flight at once under load (a lane sends one at a
// time; a few destinations busy together).
const langfuseBodiesKept = 8

// NewOpener returns the opener of the three destinations.
func NewOpener(d OpenerDeps) Opener {
	// Langfuse request bodies, shared by every Langfuse destination: at
	// most a few batches' worth kept, however many teams have one.
	langfuseBodies := langfuse.NewBuffers(langfuseBodiesKept)
	return func(ctx context.Context, cb callbacks.Callback, v map[string]string) (Destination, error) {
		or := func(k, def string) string {
			if s := v[k]; s != "" {
				return s
			}
			return def
		}
		client := d.Client
		if cb.Gateway {
			client = d.GatewayClient
		}
		switch cb.Name {
		case callbacks.Langfuse:
			secret := or(callbacks.VarLangfuseSecretKey, v[callbacks.VarLangfuseSecret])
			return langfuse.New(client, or(callbacks.VarLangfuseHost, callbacks.DefaultLangfuseHost), v[callbacks.VarLangfusePublicKey], secret, langfuseBodies), nil
		case callbacks.LangSmith:
			return langsmith.New(client, or(callbacks.VarLangSmithBaseURL, callbacks.DefaultLangSmithBaseURL),
				v[callbacks.VarLangSmithAPIKey], or(callbacks.VarLangSmithProject, callbacks.DefaultLangSmithProject)), nil
		case callbacks.GCSBucket:
			var key []byte
			var err error
			if cb.Gateway {
				key, err = callbacks.GatewayServiceAccount(v[callbacks.VarGCSServiceAccount])
			} else {
				key, err = d.Accounts.Key(v[callbacks.VarGCSServiceAccount])
			}
			if err != nil {
				return nil, callbacks.Permanent(fmt.Errorf("service account of %s: %w", cb.ID(), err))
			}
			ts, err := google.NewTokenSource(string(key), google.Options{HTTPClient: client})
			if err != nil {
				return nil, callbacks.Permanent(fmt.Errorf("service account of %s: %w", cb.ID(), err))
			}
			return gcsbucket.New(client, d.GCSEndpoint, v[callbacks.VarGCSBucketName], ts), nil
		}
		return nil, callbacks.Permanent(fmt.Errorf("unknown callback %q", cb.Name))
	}
}

// destinationTTL is how long an opened destination (its unsealed
// credentials, a GCS token source) is reused. A changed callback has a new
// record version, hence a new entry, at once.
const destinationTTL = 10 * time.Minute

// maxDestinations bounds the cache.
const maxDestinations = 10_000

type destEntry struct {
	lane    *lane
	expires time.Time
}

// destinations caches a lane per callback version.
type destinations struct {
	open   func(ctx context.Context, cb callbacks.Callback) (Destination, error)
	now    func() time.Time
	newLn  func(Destination) *lane
	mu     sync.Mutex
	lanes  map[string]destEntry
	opened sync.Map // key → *sync.Mutex, so one callback is opened once at a time
}

func destKey(cb callbacks.Callback) string {
	return cb.TeamID + "\x00" + cb.ID() + "\x00" + strconv.FormatInt(cb.Version, 10)
}

// lane returns the lane of cb, opening its destination on first use.
func (d *destinations) lane(ctx context.Context, cb callbacks.Callback) (*lane, error) {
	key := destKey(cb)
	if l := d.cached(key); l != nil {
		return l, nil
	}
	mu, _ := d.opened.LoadOrStore(key, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if l := d.cached(key); l != nil {
		return l, nil
	}
	dest, err := d.open(ctx, cb)
	if err != nil {
		return nil, err
	}
	l := d.newLn(dest)
	d.mu.Lock()
	if len(d.lanes) >= maxDestinations {
		now := d.now()
		for k, e := range d.lanes {
			if !now.Before(e.expires) {
				delete(d.lanes, k)
				d.opened.Delete(k)
			}
		}
	}
	d.lanes[key] = destEntry{lane: l, expires: d.now().Add(destinationTTL)}
	d.mu.Unlock()
	return l, nil
}

func (d *destinations) cached(key string) *lane {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.lanes[key]; ok && d.now().Before(e.expires) {
		return e.lane
	}
	return nil
}
