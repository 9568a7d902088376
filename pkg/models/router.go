package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/lane"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Routing defaults, LiteLLM's where it has one.
const (
	// DefaultTimeout bounds one attempt (the whole answer included) when
	// neither litellm_params.timeout nor router_settings.timeout is set.
	DefaultTimeout = 600 * time.Second
	// DefaultMaxRetries is how many times a failed call is retried when
	// neither litellm_params.max_retries nor router_settings.num_retries is set.
	DefaultMaxRetries = 2
	// DefaultCooldown is how long a failing deployment is avoided
	// (router_settings.cooldown_time).
	DefaultCooldown = 5 * time.Second
	// DefaultAllowedFails is how many failures a deployment may have in a
	// minute before it cools down (router_settings.allowed_fails). A 429 or
	// a refused credential cools it down at once.
	DefaultAllowedFails = 3
	// MaxRetryWait is the longest Retry-After the router waits out before
	// retrying. A provider asking for longer is not retried: the call goes
	// to another deployment or a fallback, or its 429 (with Retry-After)
	// goes back to the client.
	MaxRetryWait = 20 * time.Second
	// MaxCooldown caps how long a Retry-After may cool a deployment down.
	MaxCooldown = 5 * time.Minute

	backoffBase = 500 * time.Millisecond
	backoffCap  = 8 * time.Second
	limitWindow = time.Minute
)

// KeyTokens counts a finished call's tokens against the caller's key and
// team tpm limits (auth.Service). Admitting the call against them happened
// before it reached the router: at the HTTP edge, or in modelcall.Run.
type KeyTokens interface {
	RecordTokens(ctx context.Context, p auth.Principal, tokens int64) error
}

// Options build a Router.
type Options struct {
	Config  *config.Config
	Secrets config.Secrets // resolves secretsmanager/ references; nil locally
	// Getenv reads the credentials' environment fallbacks (os.Getenv in
	// main); nil: none.
	Getenv func(string) string
	// Limiter holds the per-deployment rpm/tpm windows (shared by every
	// process using the store).
	Limiter   store.Limiter
	KeyTokens KeyTokens
	// Providers maps the provider part of litellm_params.model to the
	// Provider that serves it.
	Providers map[string]Provider
	// Observer, when set, hears of retries and cooldowns (pkg/metrics).
	Observer Observer

	// Test hooks; nil uses the real thing.
	Rand  func() float64 // uniform in [0, 1)
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Observer hears of the router's decisions about deployments.
type Observer interface {
	// Retried: a call tried deployment again, or went on to it after
	// another failed.
	Retried(model, deployment, provider string)
	// CooledDown: deployment was put in cooldown.
	CooledDown(model, deployment, provider string)
}

// Router routes model calls to deployments.
type Router struct {
	observer     Observer
	groups       map[string]*group
	list         []*deployment // every deployment, in model_list order
	fallbacks    map[string][]string
	limiter      store.Limiter
	keyTokens    KeyTokens
	resolve      Resolver
	cooldown     time.Duration
	allowedFails int
	minWait      time.Duration
	rand         func() float64
	now          func() time.Time
	sleep        func(ctx context.Context, d time.Duration) error
}

// group is the deployments of one model_name.
type group struct {
	name        string
	deployments []*deployment
	weights     []float64 // all zero: uniform
}

// deployment is one model_list entry.
type deployment struct {
	cfg        config.Deployment
	index      int // in its group
	target     Target
	scope      string // limiter scope prefix
	provider   Provider
	timeout    time.Duration
	maxRetries int
	rpm, tpm   int64
	// mock is litellm_params.mock_response: the deployment's calls are
	// answered from it, never sent to its provider.
	mock *config.Mock

	endpoint atomic.Pointer[endpointBox]
	openMu   sync.Mutex
	health   health
}

type endpointBox struct{ ep Endpoint }

// Target names the deployment a call went to.
type Target struct {
	ModelGroup   string // the model_name
	DeploymentID string // model_info.id, or model_name#index in model_list
	Provider     string
	Model        string // the provider's model name
	APIBase      string
}

// Reply is a routed call's outcome.
type Reply struct {
	// Answer is the provider's answer; nil when the call failed.
	Answer *Answer
	// Target is the deployment that answered, or the last one tried.
	Target Target
	// Attempts counts provider calls, retries and fallbacks included.
	Attempts int
	// Fallback is true when a fallback model answered.
	Fallback bool

	d *deployment
	// body wraps the answer's body (Answer.Body points here): one
	// allocation with the Reply rather than one more per call.
	body cancelOnClose
}

// NewRouter builds a router over the config's model_list. It does no I/O:
// deployments are opened (credentials resolved) on first use.
func NewRouter(opts Options) (*Router, error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	if opts.Limiter == nil {
		return nil, errors.New("models: a limiter is required")
	}
	rs := cfg.RouterSettings
	r := &Router{
		observer:  opts.Observer,
		groups:    map[string]*group{},
		fallbacks: map[string][]string{},
		limiter:   opts.Limiter,
		keyTokens: opts.KeyTokens,
		resolve: Resolver{
			Secret: func(ctx context.Context, v string) (string, error) { return cfg.Resolve(ctx, opts.Secrets, v) },
			Getenv: opts.Getenv,
		},
		cooldown:     seconds(rs.CooldownTime, DefaultCooldown),
		allowedFails: rs.AllowedFails,
		minWait:      seconds(rs.RetryAfter, 0),
		rand:         opts.Rand,
		now:          opts.Now,
		sleep:        opts.Sleep,
	}
	if r.allowedFails <= 0 {
		r.allowedFails = DefaultAllowedFails
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.sleep == nil {
		r.sleep = sleep
	}
	groupTimeout := seconds(rs.Timeout, DefaultTimeout)
	groupRetries := DefaultMaxRetries
	if rs.NumRetries != nil && *rs.NumRetries >= 0 {
		groupRetries = *rs.NumRetries
	}
	var order []string
	for i, c := range cfg.ModelList {
		g := r.groups[c.ModelName]
		if g == nil {
			g = &group{name: c.ModelName}
			r.groups[c.ModelName] = g
			order = append(order, c.ModelName)
		}
		id := c.ID(i)
		d := &deployment{
			cfg:   c,
			index: len(g.deployments),
			target: Target{
				ModelGroup: c.ModelName, DeploymentID: id,
				Provider: c.Params.Provider(), Model: c.Params.ProviderModel(), APIBase: c.Params.APIBase,
			},
			scope:      "deploy:" + id,
			provider:   opts.Providers[c.Params.Provider()],
			timeout:    seconds(c.Params.Timeout, groupTimeout),
			maxRetries: groupRetries,
			rpm:        c.Params.RPM,
			tpm:        c.Params.TPM,
			mock:       c.Params.MockResponse,
		}
		if c.Params.MaxRetries != nil && *c.Params.MaxRetries >= 0 {
			d.maxRetries = *c.Params.MaxRetries
		}
		g.deployments = append(g.deployments, d)
		r.list = append(r.list, d)
	}
	for _, name := range order {
		g := r.groups[name]
		g.weights = weights(g.deployments)
	}
	for _, entry := range rs.Fallbacks {
		for model, to := range entry {
			if _, ok := r.groups[model]; !ok && model != "*" {
				slog.Warn("router_settings.fallbacks names a model that is not in model_list; ignored", "model", model)
				continue
			}
			for _, fb := range to {
				if _, ok := r.groups[fb]; !ok {
					slog.Warn("router_settings.fallbacks falls back to a model that is not in model_list; ignored", "model", model, "fallback", fb)
					continue
				}
				r.fallbacks[model] = append(r.fallbacks[model], fb)
			}
		}
	}
	return r, nil
}

func seconds(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// weights follows LiteLLM's simple-shuffle: weight if any deployment of the
// group sets it, else rpm, else tpm; a deployment without the chosen field
// weighs 0 (picked only when the others are unavailable). None set: uniform.
func weights(ds []*deployment) []float64 {
	pick := []func(*deployment) float64{
		func(d *deployment) float64 { return d.cfg.Params.Weight },
		func(d *deployment) float64 { return float64(d.rpm) },
		func(d *deployment) float64 { return float64(d.tpm) },
	}
	w := make([]float64, len(ds))
	for _, f := range pick {
		set := false
		for i, d := range ds {
			w[i] = max(f(d), 0)
			set = set || w[i] > 0
		}
		if set {
			return w
		}
	}
	clear(w)
	return w
}

// Has reports whether model is a configured model_name.
func (r *Router) Has(model string) bool { return r.groups[model] != nil }

// Embed routes an embeddings call. The Reply is never nil; on error it says
// which deployment was tried last. A request with a mock_response is
// answered from it, as Chat answers one.
func (r *Router) Embed(ctx context.Context, p auth.Principal, req *oai.EmbeddingRequest) (*Reply, error) {
	return r.call(ctx, p, req.Model, "embeddings", req.MockResponse != nil, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		e, ok := ep.(Embedder)
		if !ok {
			return nil, errUnsupported
		}
		return e.Embed(ctx, req)
	})
}

// Moderate routes a moderations call; req.Model must be set. As for Embed,
// the Reply is never nil.
func (r *Router) Moderate(ctx context.Context, p auth.Principal, req *oai.ModerationRequest) (*Reply, error) {
	return r.call(ctx, p, req.Model, "moderations", false, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		m, ok := ep.(Moderator)
		if !ok {
			return nil, errUnsupported
		}
		return m.Moderate(ctx, req)
	})
}

// Chat routes a chat completions call. A request with a mock_response is
// routed as any other (allow-lists, deployment pick and limits) but answered
// from its text, as a deployment with a mock_response is, without opening
// the deployment or calling its provider. As for Embed, the Reply is never
// nil.
func (r *Router) Chat(ctx context.Context, p auth.Principal, req *oai.ChatRequest) (*Reply, error) {
	return r.call(ctx, p, req.Model, "chat completions", req.MockResponse != nil, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		c, ok := ep.(Chatter)
		if !ok {
			return nil, errUnsupported
		}
		return c.Chat(ctx, req)
	})
}

// Complete routes a text completions call (/v1/completions).
func (r *Router) Complete(ctx context.Context, p auth.Principal, req *oai.CompletionRequest) (*Reply, error) {
	return r.call(ctx, p, req.Model, "text completions (/v1/completions: OpenAI and OpenAI-compatible, and Azure OpenAI deployments only)", false, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		c, ok := ep.(Completer)
		if !ok {
			return nil, errUnsupported
		}
		return c.Complete(ctx, req)
	})
}

// Respond routes a Responses API call (/v1/responses).
func (r *Router) Respond(ctx context.Context, p auth.Principal, req *oai.ResponsesRequest) (*Reply, error) {
	return r.call(ctx, p, req.Model, "the Responses API (/v1/responses: OpenAI and OpenAI-compatible, and Azure OpenAI deployments only)", false, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		c, ok := ep.(Responder)
		if !ok {
			return nil, errUnsupported
		}
		return c.Respond(ctx, req)
	})
}

var errUnsupported = errors.New("the deployment's provider does not serve this call")

type operation func(ctx context.Context, ep Endpoint) (*Answer, error)

// call checks the caller may use model, then tries its deployments and, if
// they fail, its fallbacks. The error returned is the
// requested model's: fallbacks are a best effort. With mock, every
// deployment is answered by its mock endpoint (the request's own
// mock_response); without, only those configured with one are.
func (r *Router) call(ctx context.Context, p auth.Principal, model, what string, mock bool, op operation) (*Reply, error) {
	rep := &Reply{Target: Target{ModelGroup: model}}
	if !p.AllowsModel(model) {
		return rep, api.Forbidden("This key may not use model '%s'.", model)
	}
	g := r.groups[model]
	if g == nil {
		return rep, api.ModelNotFound(model)
	}
	final, err := r.tryGroup(ctx, g, what, mock, op, rep)
	if err == nil || final {
		return rep, err
	}
	first := rep.Target
	for _, fb := range r.fallbacksOf(model) {
		if !p.AllowsModel(fb) {
			continue
		}
		// A fallback's own failure, even a request error, does not end
		// the search: the next fallback may accept what this one refused.
		_, fbErr := r.tryGroup(ctx, r.groups[fb], what, mock, op, rep)
		if fbErr == nil {
			rep.Fallback = true
			return rep, nil
		}
		if ctx.Err() != nil {
			return rep, fbErr
		}
	}
	if rep.Attempts == 0 {
		rep.Target = first
	}
	return rep, err
}

func (r *Router) fallbacksOf(model string) []string {
	if fbs, ok := r.fallbacks[model]; ok {
		return fbs
	}
	return r.fallbacks["*"]
}

// tryGroup tries g's deployments with retries. final reports an error no
// fallback can fix (the request's own fault, the client gone, a store down).
func (r *Router) tryGroup(ctx context.Context, g *group, what string, mock bool, op operation, rep *Reply) (final bool, err error) {
	var (
		// skip: deployments this request will not use again; failed: ones
		// that failed it, used again only when nothing better is left.
		skip     = make([]bool, len(g.deployments))
		failed   = make([]bool, len(g.deployments))
		lastErr  error
		lastAt   Target
		limited  *api.Error
		attempts int
	)
	for {
		d, lim, err := r.pick(ctx, g, skip, failed)
		if err != nil {
			return true, err
		}
		if lim != nil && (limited == nil || lim.RetryAfter < limited.RetryAfter) {
			limited = lim
		}
		if d == nil {
			switch {
			case lastErr != nil:
				return false, clientError(lastErr, lastAt)
			case limited != nil:
				return false, limited
			}
			return false, api.Unavailable("Model '%s' has no deployment available.", g.name)
		}
		rep.Target, rep.d = d.target, d
		var ep Endpoint
		if mock || d.mock != nil {
			ep = mockEndpoint{model: d.target.Model, mock: d.mock}
		} else if ep, err = r.open(ctx, d); err != nil {
			lastErr, lastAt = err, rep.Target
			skip[d.index] = true
			continue
		}
		rep.Target.APIBase = ep.APIBase()
		ans, took, err := r.attempt(ctx, d, ep, op, &rep.body)
		// Waits on providers (until each answer's headers) and between
		// retries are not sluice's overhead.
		api.AddWait(ctx, took)
		if errors.Is(err, errUnsupported) {
			lastErr, lastAt = api.InvalidValue("model", "Model '%s' does not support %s.", g.name, what), rep.Target
			skip[d.index] = true
			continue
		}
		rep.Attempts++
		attempts++
		if rep.Attempts > 1 && r.observer != nil {
			r.observer.Retried(d.target.ModelGroup, d.target.DeploymentID, d.target.Provider)
		}
		if err == nil {
			rep.Answer = ans
			return false, nil
		}
		lastErr, lastAt = err, rep.Target
		if ctx.Err() != nil {
			return true, clientError(err, rep.Target)
		}
		now := r.now()
		switch classify(err) {
		case failFatal:
			return true, clientError(err, rep.Target)
		case failDeployment:
			r.coolFor(d, now, r.cooldown)
			skip[d.index] = true
			continue
		}
		var pe *ProviderError
		retryAfter := time.Duration(0)
		if errors.As(err, &pe) {
			retryAfter = pe.RetryAfter
		}
		r.noteFailure(d, pe, retryAfter, now)
		failed[d.index] = true
		if attempts > d.maxRetries {
			return false, clientError(err, rep.Target)
		}
		if retryAfter > MaxRetryWait {
			skip[d.index] = true // it asked for longer than we wait
			continue
		}
		if r.healthyOther(g, skip, failed, now) {
			continue // another deployment can take it now
		}
		wait := r.backoff(attempts, retryAfter)
		if deadline, ok := ctx.Deadline(); ok && now.Add(wait).After(deadline) {
			return false, clientError(err, rep.Target)
		}
		if err := r.sleep(ctx, wait); err != nil {
			return true, clientError(err, rep.Target)
		}
		api.AddWait(ctx, wait)
	}
}

// pick chooses a deployment of g not in skip, preferring ones neither
// cooling down nor failed in this request, weighted; it takes the
// deployment's rpm/tpm, and skips deployments whose windows are full
// (reporting the soonest to reopen).
func (r *Router) pick(ctx context.Context, g *group, skip, failed []bool) (*deployment, *api.Error, error) {
	now := r.now()
	var limited *api.Error
	for {
		d := r.choose(g, skip, failed, now)
		if d == nil {
			return nil, limited, nil
		}
		lim, err := r.take(ctx, d)
		if err != nil {
			return nil, nil, err
		}
		if lim == nil {
			return d, limited, nil
		}
		skip[d.index] = true
		if limited == nil || lim.RetryAfter < limited.RetryAfter {
			limited = lim
		}
	}
}

func (r *Router) choose(g *group, skip, failed []bool, now time.Time) *deployment {
	healthy := r.healthyOther(g, skip, failed, now)
	// Cooling down is a preference: when every deployment left is cooling
	// (or failed this request), one of them is still tried rather than
	// failing the call unasked.
	usable := func(i int) bool {
		return !skip[i] && (!healthy || (!failed[i] && !g.deployments[i].health.cooling(now)))
	}
	var total float64
	n := 0
	for i := range g.deployments {
		if usable(i) {
			total += g.weights[i]
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if total > 0 {
		x := r.rand() * total
		var last *deployment
		for i, d := range g.deployments {
			if !usable(i) || g.weights[i] == 0 {
				continue
			}
			last = d
			if x < g.weights[i] {
				return d
			}
			x -= g.weights[i]
		}
		return last // rounding
	}
	k := int(r.rand() * float64(n))
	for i, d := range g.deployments {
		if usable(i) {
			if k == 0 {
				return d
			}
			k--
		}
	}
	return nil
}

// healthyOther reports whether g has a deployment to try now: not
// skipped, not failed in this request, not cooling down.
func (r *Router) healthyOther(g *group, skip, failed []bool, now time.Time) bool {
	for i, o := range g.deployments {
		if !skip[i] && !failed[i] && !o.health.cooling(now) {
			return true
		}
	}
	return false
}

// take counts one request against d's rpm window and checks that its tpm
// window has room, in one limiter take (auth.AdmitTakes: one write). A
// full window is returned as the 429 it would be.
func (r *Router) take(ctx context.Context, d *deployment) (*api.Error, error) {
	if d.rpm <= 0 && d.tpm <= 0 {
		return nil, nil
	}
	dec, err := r.limiter.Take(ctx, d.scope, limitWindow, auth.AdmitTakes(d.rpm, d.tpm)...)
	if err != nil {
		return nil, fmt.Errorf("deployment %s limits: %w", d.target.DeploymentID, err)
	}
	if dec.Allowed {
		return nil, nil
	}
	kind, typ := "rpm", api.TypeRequests
	if dec.Refused == auth.CounterTokens {
		kind, typ = "tpm", api.TypeTokens
	}
	return api.RateLimited(typ, dec.RetryAfter,
		"Rate limit reached for model '%s': its deployments are at their %s limits. Retry after %s.",
		d.target.ModelGroup, kind, dec.RetryAfter.Round(time.Second)), nil
}

// open returns d's endpoint, opening it on first use. Success is kept for
// the life of the process (credentials resolve once); a failure is not.
func (r *Router) open(ctx context.Context, d *deployment) (Endpoint, error) {
	if b := d.endpoint.Load(); b != nil {
		return b.ep, nil
	}
	d.openMu.Lock()
	defer d.openMu.Unlock()
	if b := d.endpoint.Load(); b != nil {
		return b.ep, nil
	}
	if d.provider == nil {
		return nil, api.Unavailable("Model '%s' is configured with provider '%s', which this gateway does not support.", d.target.ModelGroup, d.target.Provider)
	}
	ep, err := d.provider.Open(ctx, d.cfg, r.resolve)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		u := api.Unavailable("Model '%s' cannot be used: its credentials could not be resolved.", d.target.ModelGroup)
		u.Err = fmt.Errorf("open deployment %s: %w", d.target.DeploymentID, err)
		return nil, u
	}
	d.endpoint.Store(&endpointBox{ep: ep})
	return ep, nil
}

// attempt makes one provider call bounded by d's timeout. The timeout
// covers the answer's body too: closing the body releases it. A call whose
// context ends sooner anyway (a Lambda invocation's deadline) gets no
// timeout of its own: it would never fire. A call of an HTTP/1 request is
// bounded on its connection's lane (package lane), which costs no context
// or timer of its own; any other gets a context.WithDeadline. On success
// the answer's body is wrapped in body.
func (r *Router) attempt(ctx context.Context, d *deployment, ep Endpoint, op operation, body *cancelOnClose) (*Answer, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(d.timeout)
	actx, end := ctx, attemptEnd{}
	if dl, ok := ctx.Deadline(); !ok || dl.After(deadline) {
		if actx, end.lane, ok = lane.Begin(ctx, deadline); !ok {
			actx, end.cancel = context.WithDeadline(ctx, deadline)
		}
	}
	ans, err := op(actx, ep)
	took := time.Since(start)
	if err != nil {
		end.release()
		return nil, took, err
	}
	*body = cancelOnClose{ReadCloser: ans.Body, end: end}
	ans.Body = body
	return ans, took, nil
}

// attemptEnd releases what bounded an attempt (release, once): its lane,
// its context, or nothing (zero).
type attemptEnd struct {
	lane   *lane.Lane
	cancel context.CancelFunc
}

func (e *attemptEnd) release() {
	switch {
	case e.lane != nil:
		e.lane.End()
	case e.cancel != nil:
		e.cancel()
	}
}

// cancelOnClose releases an attempt's bound when its answer's body is
// closed: once, however often and from whichever goroutines it is closed.
type cancelOnClose struct {
	io.ReadCloser
	end    attemptEnd
	closed int32 // atomic: 1 once the bound is released
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	if atomic.CompareAndSwapInt32(&c.closed, 0, 1) {
		c.end.release()
	}
	return err
}

// WriteTo keeps io.Copy's fast paths available through the wrapper.
func (c *cancelOnClose) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, c.ReadCloser)
}

// backoff is the wait before retry number n (1-based): the provider's
// Retry-After when it gave one, else exponential with equal jitter.
func (r *Router) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return max(retryAfter, r.minWait)
	}
	d := backoffCap
	if n < 8 {
		d = min(backoffBase<<(n-1), backoffCap)
	}
	d = d/2 + time.Duration(r.rand()*float64(d/2))
	return max(d, r.minWait)
}

func (r *Router) noteFailure(d *deployment, pe *ProviderError, retryAfter time.Duration, now time.Time) {
	if pe != nil && pe.Status == 429 {
		r.coolFor(d, now, min(max(r.cooldown, retryAfter), MaxCooldown))
		return
	}
	if d.health.fail(now) > r.allowedFails {
		r.coolFor(d, now, r.cooldown)
	}
}

// coolFor puts d in cooldown for dur from now.
func (r *Router) coolFor(d *deployment, now time.Time, dur time.Duration) {
	d.health.coolFor(now, dur)
	if r.observer != nil {
		r.observer.CooledDown(d.target.ModelGroup, d.target.DeploymentID, d.target.Provider)
	}
}

// Finish counts a finished call's tokens against its deployment's tpm
// window (rep may be nil: no deployment) and the caller's key and team tpm
// limits. Failures to count are logged: the answer has already gone out.
func (r *Router) Finish(ctx context.Context, p auth.Principal, rep *Reply, tokens int64) {
	if tokens <= 0 {
		return
	}
	if rep != nil && rep.d != nil && rep.d.tpm > 0 {
		d := rep.d
		if _, err := r.limiter.Take(ctx, d.scope, limitWindow, auth.TokensTake(tokens)); err != nil {
			slog.WarnContext(ctx, "deployment tokens not counted", "deployment", d.target.DeploymentID, "error", err)
		}
	}
	if r.keyTokens != nil {
		if err := r.keyTokens.RecordTokens(ctx, p, tokens); err != nil {
			slog.WarnContext(ctx, "key and team tokens not counted", "error", err)
		}
	}
}

// health is a deployment's recent failures, in this process only: a Lambda
// container or the local process each learn on their own which deployment
// is failing (cheap, and a wrong guess costs one retry).
type health struct {
	coolUntil atomic.Int64 // Unix nanoseconds

	mu          sync.Mutex
	windowStart time.Time
	fails       int
}

func (h *health) cooling(now time.Time) bool { return now.UnixNano() < h.coolUntil.Load() }

func (h *health) coolFor(now time.Time, d time.Duration) {
	until := now.Add(d).UnixNano()
	for {
		cur := h.coolUntil.Load()
		if cur >= until || h.coolUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// fail counts a failure in the current minute and returns the count.
func (h *health) fail(now time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.windowStart) >= time.Minute {
		h.windowStart, h.fails = now, 0
	}
	h.fails++
	return h.fails
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
