// Package passthrough relays requests to four providers' own APIs — Vertex
// AI, Bedrock, Anthropic and Gemini — for clients that use the providers'
// SDKs with only the base URL pointed at sluice. sluice checks the caller's
// key, removes it and every other client credential, injects the provider
// credential (an API key, a Google OAuth2 token, or a SigV4 signature),
// counts the call's tokens against the key's and team's limits, and relays
// the request and the answer
// byte for byte, streaming both ways, while a bounded tee reads the token
// usage for the log event.
package passthrough

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
	"github.com/sluice-gateway/sluice/pkg/relaybuf"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Defaults of Options.
const (
	// DefaultMaxBody bounds a streamed request body.
	DefaultMaxBody = 512 << 20
	// DefaultMaxSignedBody bounds a request body read whole before it is
	// sent: Bedrock's, because SigV4 signs its hash, and one that names the
	// model of a call by a key limited to some models.
	DefaultMaxSignedBody = 32 << 20
	// DefaultTimeout bounds a whole call, answer included: the longest a
	// Lambda function may run.
	DefaultTimeout = 15 * time.Minute
	// DefaultIdleTimeout bounds the silence between two reads of an answer.
	DefaultIdleTimeout = 5 * time.Minute
)

// Limits counts calls' tokens against the key's and team's tpm limits
// (auth.Service). The calls were admitted against them at the HTTP edge.
type Limits interface {
	RecordTokens(ctx context.Context, p auth.Principal, tokens int64) error
}

// Options configure a Service.
type Options struct {
	Config  *config.Config
	Secrets config.Secrets // resolves secretsmanager/ references (nil: none)
	// Getenv reads the environment fallbacks (ANTHROPIC_API_KEY, ...).
	Getenv func(string) string
	// Client calls the providers (providers.NewHTTPClient).
	Client *http.Client
	Limits Limits
	// Records holds which team created each provider object that passed
	// through (ownership.go).
	Records store.Records
	Events  *logevent.Emitter // nil: no events
	// AWSDefaultChain finds AWS credentials when none are configured
	// (bedrock.SDKDefaultChain); nil: none.
	AWSDefaultChain bedrock.DefaultChain
	MaxBody         int64
	MaxSignedBody   int64
	Timeout         time.Duration
	IdleTimeout     time.Duration
	// TokenTimeout bounds a call to Google's token endpoint.
	TokenTimeout time.Duration
}

// Service serves the passthrough prefixes.
type Service struct {
	opts      Options
	resolvers map[Provider]*resolver
	// aliases maps a provider's model ids to the model_list names serving
	// them, so a key allowed a configured name may use its model here.
	aliases   map[Provider]map[string][]string
	buffers   relaybuf.List
	headers   headerPool
	transport http.RoundTripper
	owners    owners
	echoes    echoCache
}

// New builds the service. It does no I/O: credentials are resolved on a
// prefix's first request. An api_base that is not a valid URL is an error.
func New(opts Options) (*Service, error) {
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Client == nil {
		return nil, errors.New("passthrough: an HTTP client is required")
	}
	if opts.Limits == nil {
		return nil, errors.New("passthrough: a limiter is required")
	}
	if opts.Records == nil {
		return nil, errors.New("passthrough: a records store is required")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxSignedBody <= 0 {
		opts.MaxSignedBody = DefaultMaxSignedBody
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	s := &Service{
		opts:      opts,
		resolvers: map[Provider]*resolver{},
		aliases:   map[Provider]map[string][]string{},
		transport: opts.Client.Transport,
		owners:    owners{records: opts.Records, now: time.Now},
	}
	if s.transport == nil {
		s.transport = http.DefaultTransport
	}
	cfg := opts.Config
	var errs []error
	for _, p := range providerList {
		src := gather(cfg, p)
		if b := src.apiBase; b != "" && !strings.HasPrefix(b, "secretsmanager/") {
			if _, err := parseBase(b); err != nil {
				errs = append(errs, fmt.Errorf("passthrough %s (%s): %w", p, src.where, err))
			}
		}
		s.resolvers[p] = &resolver{
			provider: p,
			src:      src,
			resolve: models.Resolver{
				Secret: func(ctx context.Context, v string) (string, error) { return cfg.Resolve(ctx, opts.Secrets, v) },
				Getenv: opts.Getenv,
			},
			chain:    opts.AWSDefaultChain,
			tokenOpt: google.Options{HTTPClient: opts.Client, FetchTimeout: opts.TokenTimeout},
		}
		s.aliases[p] = map[string][]string{}
	}
	for _, d := range cfg.ModelList {
		p := Provider(d.Params.Provider())
		if m, ok := s.aliases[p]; ok {
			id := d.Params.ProviderModel()
			m[id] = append(m[id], d.ModelName)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler serves one provider's prefix: every method on /{prefix}/{endpoint...}.
func (s *Service) Handler(p Provider) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error { return s.serve(w, r, p) }
}

// Sentinel causes of a call's cancellation.
var (
	errCallTimeout = errors.New("passthrough: the call took longer than its limit")
	errIdleTimeout = errors.New("passthrough: the upstream stopped sending")
)

// call is what one passthrough call did, for its log event. It lives on
// serve's stack: what outlives the call or is handed to another goroutine
// — the log event (callEvent), the watchdog, a streamed body's limit — is
// allocated apart, and only when the call needs it.
type call struct {
	provider  Provider
	principal auth.Principal
	method    string
	path      string
	apiBase   string
	model     string
	status    int
	streamed  bool
	start     time.Time
	first     time.Time
	counts    counts
	secrets   *echoSet   // the credentials injected: never handed back
	event     *callEvent // built early when the cost header needs it (logEvent)
	fullPath  string     // the request's escaped path, when it names the provider's first prefix
}

// callEvent is a call's log event and the event's exchange, in one
// allocation. The emitter holds it after the answer (until it is
// published, or a deferred publish waits for it), so it holds nothing else
// of the call: the call's other state dies with the request.
type callEvent struct {
	ev       logevent.Event
	exchange logevent.Passthrough
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, p Provider) error {
	c := call{provider: p, principal: auth.FromContext(r.Context()), method: r.Method, start: time.Now()}
	err := s.relay(w, r, &c)
	s.finish(r, &c, err)
	return err
}

// relay runs the call: validate, authorize, forward, stream back.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	up, t, ep, err := s.route(ctx, r, c)
	if err != nil {
		return err
	}
	if up.base != nil && t.url.Host == up.base.Host && t.url.Scheme == up.base.Scheme {
		c.apiBase = up.origin
	} else {
		c.apiBase = t.url.Scheme + "://" + t.url.Host
	}
	c.model = t.model
	if c.model != "" && !s.allowsModel(c.principal, c.provider, c.model) {
		return forbiddenModel(c.model)
	}

	// A key limited to some models runs only models sluice can read where
	// the provider reads them (allowlist.go).
	var rule modelRule
	if c.principal.RestrictsModels() {
		if rule, err = checkRestricted(r, c, ep); err != nil {
			return err
		}
	}

	obj := classifyObject(c.provider, r.Method, ep)
	if err := s.checkObjectAccess(ctx, c, obj); err != nil {
		return err
	}
	rb, err := s.requestBody(w, r, c, rule)
	if err != nil {
		return err
	}

	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := startWatchdog(cancel, s.opts.Timeout)
	defer watch.stop()

	header := outboundHeader(s.headers.get(), r.Header)
	out := outboundRequest(cctx, r.Method, t.url, header, &rb)
	if err := s.authorize(cctx, up, out, rb.buffered); err != nil {
		return err
	}
	c.secrets = up.keyEchoes
	if up.setKey == nil {
		c.secrets = s.injectedSecrets(out.Header)
	}

	// The transport directly: the client would only add redirect handling,
	// which provider calls never follow, and a copy of every header.
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		return s.callError(r, cctx, rb.limited, err)
	}
	// After the body's Close (defers run last first): the call is over.
	defer s.headers.put(header)
	defer resp.Body.Close()
	if answersObjects(obj, c, resp) {
		return s.answerObjects(w, r, cctx, watch, resp, c, obj)
	}
	return s.answer(w, r, cctx, watch, resp, c)
}

// outboundRequest is the request to the provider, built apart from relay:
// relay's frame would otherwise hold the request literal (which WithContext
// copies) while the answer is relayed and metered further down the stack.
func outboundRequest(ctx context.Context, method string, u *url.URL, header http.Header, rb *requestBody) *http.Request {
	out := (&http.Request{
		Method: method, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: rb.body, ContentLength: rb.length,
	}).WithContext(ctx)
	if buffered := rb.buffered; len(buffered) > 0 {
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buffered)), nil }
	}
	return out
}

// route checks the request's path and query and finds where the call
// goes: the provider's upstream (its credentials resolved) and the target
// URL, with the model the path names.
func (s *Service) route(ctx context.Context, r *http.Request, c *call) (*upstream, target, endpoint, error) {
	if r.RequestURI != "" && r.RequestURI[0] != '/' {
		return nil, target{}, endpoint{}, api.InvalidValue("path", "Absolute-form request targets are refused on passthrough routes.")
	}
	escaped := r.URL.EscapedPath()
	prefix, rest := splitPrefix(escaped)
	if !isPrefixOf(c.provider, prefix) {
		return nil, target{}, endpoint{}, api.NotFound("Unknown route: %s %s.", r.Method, r.URL.Path)
	}
	if prefix == prefixes[c.provider][0] && strings.HasPrefix(escaped, "/") {
		c.fullPath = escaped // the event's path, as finish would join it
	}
	ep, err := parseEndpoint(rest)
	if err != nil {
		return nil, target{}, endpoint{}, err
	}
	c.path = ep.escaped
	query, err := forwardQuery(r.URL.RawQuery)
	if err != nil {
		return nil, target{}, ep, err
	}
	if c.provider == VertexAI {
		if err := checkVertexLocation(ep); err != nil {
			return nil, target{}, ep, err
		}
	}
	up, err := s.resolvers[c.provider].get(ctx)
	if err != nil {
		return nil, target{}, ep, err
	}
	var t target
	switch c.provider {
	case Anthropic:
		t = anthropicTarget(&up.join, ep, query)
	case Gemini:
		t = geminiTarget(&up.join, ep, query)
	case VertexAI:
		t, err = vertexTarget(up, ep, query)
	case Bedrock:
		t = bedrockTarget(up, ep, query)
	}
	return up, t, ep, err
}

// requestBody is what goes upstream as the request's body.
type requestBody struct {
	body     io.ReadCloser
	length   int64
	buffered []byte       // the body read whole, when it was
	limited  *limitedBody // the body streamed, when it is
}

// smallBody is the largest declared body length read whole before the call,
// as the model routes read theirs: the transport then writes it with the
// request's headers in one write, where a streamed body costs a write of
// its own (and runs the body's reads on the transport's goroutine).
const smallBody = relaybuf.Size

// requestBody prepares the body: Bedrock's is read whole (SigV4 signs its
// hash); so is one that names the model of a restricted key's call (rule),
// and one declared at most smallBody long. Every other body streams up,
// within MaxBody.
func (s *Service) requestBody(w http.ResponseWriter, r *http.Request, c *call, rule modelRule) (requestBody, error) {
	rb := requestBody{body: http.NoBody}
	needModel := rule.source == sourceBody || rule.source == sourceBatch
	signed := c.provider == Bedrock || needModel
	if small := r.ContentLength > 0 && r.ContentLength <= min(smallBody, s.opts.MaxBody); signed || small {
		// Each keeps its bound: a body read for its bytes MaxSignedBody,
		// a small one the streamed bodies' MaxBody.
		limit := s.opts.MaxBody
		if signed {
			limit = s.opts.MaxSignedBody
		}
		buffered, err := api.ReadBody(w, r, limit)
		if err != nil {
			return rb, err
		}
		if needModel {
			if err := s.checkBodyModels(c, buffered, rule); err != nil {
				return rb, err
			}
		}
		if len(buffered) > 0 {
			rb.buffered, rb.body, rb.length = buffered, io.NopCloser(bytes.NewReader(buffered)), int64(len(buffered))
		}
		return rb, nil
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if r.ContentLength > s.opts.MaxBody {
			return rb, api.TooLarge("The request body (%d bytes) is larger than the passthrough limit of %d bytes.", r.ContentLength, s.opts.MaxBody)
		}
		rb.limited = &limitedBody{r: r.Body, left: s.opts.MaxBody}
		if r.ContentLength > 0 {
			rb.limited.left, rb.limited.exact = r.ContentLength, true
		}
		rb.body, rb.length = rb.limited, r.ContentLength
	}
	return rb, nil
}

func isPrefixOf(p Provider, prefix string) bool {
	for _, v := range prefixes[p] {
		if v == prefix {
			return true
		}
	}
	return false
}

func forbiddenModel(model string) error {
	return api.Forbidden("This key may not use the model '%s'.", model)
}

// authorize injects the provider credential: the only credential the
// upstream receives.
func (s *Service) authorize(ctx context.Context, up *upstream, out *http.Request, body []byte) error {
	switch up.provider {
	case Anthropic, Gemini:
		up.setKey(out.Header)
	case VertexAI:
		token, err := up.tokens.AccessToken(ctx)
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return cause
			}
			return api.Upstream(err, "sluice could not obtain a Google access token for the vertex_ai passthrough.")
		}
		out.Header.Set("Authorization", "Bearer "+token)
	case Bedrock:
		// Sign a minimal header set (host, content-type, x-amz-date, the
		// session token, content-length); the client's other headers are
		// added unsigned afterwards, so nothing added on the way can break
		// the signature.
		rest := out.Header
		out.Header = make(http.Header, 4)
		if ct, ok := rest["Content-Type"]; ok {
			out.Header["Content-Type"] = ct
		}
		if err := up.aws.Sign(ctx, out, body); err != nil {
			if errors.Is(err, bedrock.ErrNoCredentials) {
				e := api.Unavailable("The /bedrock passthrough found no usable AWS credentials (%s).", up.aws.Source)
				e.Err = err
				return e
			}
			return fmt.Errorf("sign bedrock request: %w", err)
		}
		for k, vs := range rest {
			if _, signed := out.Header[k]; !signed {
				out.Header[k] = vs
			}
		}
	}
	return nil
}

// callError classifies a failure to get an answer's headers.
func (s *Service) callError(r *http.Request, ctx context.Context, limited *limitedBody, err error) error {
	var (
		tooLarge *http.MaxBytesError
		bodyErr  *api.Error
	)
	switch cause := context.Cause(ctx); {
	case limited != nil && limited.exceeded, errors.As(err, &tooLarge):
		return api.TooLarge("The request body is larger than the passthrough limit of %d bytes.", s.opts.MaxBody)
	case limited != nil && limited.refused.Load() != nil:
		// The server's own verdict on the client's body (408: too slow),
		// whether the transport saw it or the cancellation it causes.
		return limited.refused.Load()
	case errors.As(err, &bodyErr):
		return bodyErr
	case r.Context().Err() != nil:
		// The client went away; nobody reads an answer.
		return fmt.Errorf("passthrough: client gone: %w", context.Canceled)
	case errors.Is(cause, errCallTimeout):
		return api.UpstreamTimeout(err, "The upstream did not answer within %s.", s.opts.Timeout)
	}
	return api.Upstream(err, "The upstream could not be reached.")
}

// answer relays the upstream's answer: status and headers, then the body as
// it arrives, flushed read by read when it streams, through the usage meter.
// A small whole answer is read first, for its cost header (answerWhole).
func (s *Service) answer(w http.ResponseWriter, r *http.Request, ctx context.Context, watch *watchdog, resp *http.Response, c *call) error {
	if c.provider == Bedrock {
		c.counts.addHeaders(resp.Header)
	}
	mt := mediaType(resp.Header.Get("Content-Type"))
	// Streaming is decided from the answer, never from the URL: an event
	// stream, or a body of unknown length, is flushed as it arrives.
	c.streamed = mt == contentSSE || mt == contentEventStream
	if readsWhole(r, resp, c) {
		return s.answerWhole(w, r, ctx, watch, resp, c, mt)
	}
	copyResponseHeader(w.Header(), resp.Header, c.secrets)
	c.status = resp.StatusCode
	flush := c.streamed || resp.ContentLength < 0
	m := newMeter(mt, resp.ContentLength, resp.StatusCode >= 400)
	defer func() { c.counts = m.finish(c.counts) }()

	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	watch.answering(s.opts.IdleTimeout)

	bp := s.buffers.Get()
	defer s.buffers.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watch.read()
			if c.first.IsZero() {
				c.first = time.Now()
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				if r.Context().Err() != nil {
					return fmt.Errorf("passthrough: client gone: %w", context.Canceled)
				}
				return fmt.Errorf("write answer: %w", werr)
			}
			m.observe(buf[:n])
			if flush {
				rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return s.readError(r, ctx, rerr)
		}
	}
}

// finish counts the call's tokens against the limits and emits its log event.
func (s *Service) finish(r *http.Request, c *call, err error) {
	// The caller may have gone: its tokens still count, and the event is
	// still published (Emit carries on past its context's end by itself;
	// its values are read through r's context, not a detached copy, whose
	// every lookup allocates).
	ctx := r.Context()
	end := time.Now()
	u := c.counts.usage()
	if u.TotalTokens > 0 {
		if rerr := s.opts.Limits.RecordTokens(context.WithoutCancel(ctx), c.principal, u.TotalTokens); rerr != nil {
			slog.WarnContext(ctx, "passthrough tokens not counted", "error", rerr)
		}
	}
	status := c.status
	if status == 0 && err != nil {
		status = api.AsError(api.ClientGone(r.Context(), err)).Status
	}
	fail := failure(c, api.ClientGone(r.Context(), err))
	outcome := logevent.StatusSuccess
	if fail != nil {
		outcome = logevent.StatusFailure
	}
	if !s.opts.Events.Wants(ctx, c.principal.TeamID, outcome) {
		return
	}
	ev := c.logEvent(ctx)
	ev.Stream = c.streamed
	ev.CustomLLMProvider = string(c.provider)
	ev.APIBase = c.apiBase
	path := c.fullPath
	if path == "" {
		path = "/" + prefixes[c.provider][0] + c.path
	}
	c.event.exchange = logevent.Passthrough{Method: c.method, Path: path, StatusCode: status}
	ev.Passthrough = &c.event.exchange
	first := c.first
	if !c.streamed {
		first = time.Time{}
	}
	ev.SetTimes(c.start, first, end)
	if fail != nil {
		// Event.Fail: the team sees the failure's message and code, never
		// a Go error's text or type.
		ev.Fail(fail)
	}
	s.opts.Events.Emit(ctx, ev)
}

// failure is why a call failed, as the team's log event shows it: an
// *api.Error (a raw error becomes AsError's, which names no internals), or
// the upstream's own error status with what its answer said; nil when the
// call succeeded.
func failure(c *call, err error) *api.Error {
	switch {
	case err != nil:
		return api.AsError(err)
	case c.status >= 400:
		msg := c.counts.failure
		if msg == "" {
			msg = c.counts.errMessage
		}
		if msg == "" {
			msg = http.StatusText(c.status)
		}
		return &api.Error{Status: c.status, Type: api.TypeServer, Code: "upstream_error", Message: fmt.Sprintf("upstream answered %d: %s", c.status, msg)}
	case c.counts.failure != "":
		return api.Upstream(nil, "upstream stream error: %s", c.counts.failure)
	}
	return nil
}

// allowsModel reports whether p may use model of provider: by its own name,
// or by a model_list name that serves it.
func (s *Service) allowsModel(p auth.Principal, provider Provider, model string) bool {
	if p.AllowsModel(model) {
		return true
	}
	for _, name := range s.aliases[provider][model] {
		if p.AllowsModel(name) {
			return true
		}
	}
	return false
}

// limitedBody streams a request body and fails once it passes its limit.
//
// A body of declared length ends after that many bytes without another read
// of the client's body. The transport reads it on its own goroutine and,
// after the declared bytes, once more to see EOF; by then the upstream may
// have answered, and net/http closes an HTTP/1 request body once the answer
// begins. That read would fail, and the transport, taking it for a failed
// upload, would drop the upstream connection in the middle of the answer.
type limitedBody struct {
	r        io.ReadCloser
	left     int64
	exact    bool // left is the declared length: nothing follows it
	exceeded bool
	refused  atomic.Pointer[api.Error] // the server refused the client's body
}

var errBodyTooLarge = errors.New("passthrough: request body over the limit")

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		if l.exact {
			return 0, io.EOF
		}
		// At the limit: the body is fine only if nothing follows.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.exceeded = true
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if err != nil && err != io.EOF {
		var refused *api.Error
		if errors.As(err, &refused) {
			l.refused.Store(refused)
		}
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.r.Close() }
