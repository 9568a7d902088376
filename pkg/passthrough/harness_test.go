package passthrough

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// fakeLimits records token counts.
type fakeLimits struct {
	mu     sync.Mutex
	tokens []int64
}

func (f *fakeLimits) RecordTokens(ctx context.Context, p auth.Principal, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, n)
	return nil
}

func (f *fakeLimits) recorded() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.tokens...)
}

// eventBus records published log events.
type eventBus struct {
	mu     sync.Mutex
	events []logevent.Event
}

func (b *eventBus) Publish(ctx context.Context, evs ...store.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range evs {
		var ev logevent.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			return err
		}
		b.events = append(b.events, ev)
	}
	return nil
}

func (b *eventBus) all() []logevent.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]logevent.Event(nil), b.events...)
}

func (b *eventBus) last(t testing.TB) logevent.Event {
	t.Helper()
	evs := b.all()
	if len(evs) == 0 {
		t.Fatal("no log event was emitted")
	}
	return evs[len(evs)-1]
}

// harness is a passthrough service mounted on a test server the way
// pkg/server mounts it: request id, a principal in the context, and errors
// rendered by api.WriteError, or the answer cut (http.ErrAbortHandler) when
// it has begun. It does not wrap the handler in the server's path checks:
// the service's own are tested.
type harness struct {
	svc    *Service
	limits *fakeLimits
	bus    *eventBus
	srv    *httptest.Server
	// principal is who requests act as (default: a team key with no limits).
	principal atomic.Pointer[auth.Principal]
	// wrapBody, when set, wraps each request's body before the service sees it.
	wrapBody func(io.ReadCloser) io.ReadCloser
	// records holds the provider objects' owners.
	records store.Records
}

// localRecords is a records table on bbolt in the test's directory.
func localRecords(t testing.TB) store.Records {
	t.Helper()
	db, err := local.OpenDB(filepath.Join(t.TempDir(), "records.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	recs, err := local.NewRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// own records team as the creator of provider object id ("files/file_1").
func (h *harness) own(t testing.TB, p Provider, id, team string) {
	t.Helper()
	if err := h.svc.owners.record(context.Background(), p, id, team); err != nil {
		t.Fatal(err)
	}
}

func teamPrincipal(models ...string) auth.Principal {
	return auth.Principal{
		TeamID: "team-a",
		Key:    &auth.KeyInfo{Token: "tok-hash", KeyAlias: "ci", TeamID: "team-a", Models: models},
		Team:   &auth.Team{TeamID: "team-a", TeamAlias: "search"},
	}
}

func newHarness(t testing.TB, yaml string, env map[string]string, tune func(*Options)) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{limits: &fakeLimits{}, bus: &eventBus{}, records: localRecords(t)}
	listening := logevent.ListeningFunc(func(context.Context, string, string) (bool, error) { return true, nil })
	opts := Options{
		Config: cfg, Getenv: func(k string) string { return env[k] }, Client: providers.NewHTTPClient(),
		Limits: h.limits, Records: h.records, Events: logevent.NewEmitter(h.bus, nil, listening, 0),
	}
	if tune != nil {
		tune(&opts)
	}
	if h.svc, err = New(opts); err != nil {
		t.Fatal(err)
	}
	p := teamPrincipal()
	h.principal.Store(&p)
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *harness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = api.StartRequest(w, r)
	r = r.WithContext(auth.WithPrincipal(r.Context(), *h.principal.Load()))
	prefix, _ := splitPrefix(r.URL.EscapedPath())
	var p Provider
	for _, prov := range providerList {
		if isPrefixOf(prov, prefix) {
			p = prov
		}
	}
	if p == "" {
		api.WriteError(w, r, api.NotFound("no such prefix"))
		return
	}
	if h.wrapBody != nil {
		r.Body = h.wrapBody(r.Body)
	}
	tw := &startedWriter{ResponseWriter: w}
	if err := h.svc.Handler(p)(tw, r); err != nil {
		if tw.started {
			panic(http.ErrAbortHandler)
		}
		api.WriteError(w, r, err)
	}
}

// startedWriter is pkg/server's trackingWriter: it notes that the answer began.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(code int) { w.started = true; w.ResponseWriter.WriteHeader(code) }
func (w *startedWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}
func (w *startedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.started = true
		f.Flush()
	}
}
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// do sends a request through the harness and returns the finished response.
func (h *harness) do(t testing.TB, method, path string, body io.Reader, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// upstreamRecorder is an httptest upstream that records what it receives.
type upstreamRecorder struct {
	srv      *httptest.Server
	hits     atomic.Int64
	mu       sync.Mutex
	requests []*recorded
	handle   func(w http.ResponseWriter, r *http.Request, body []byte)
}

type recorded struct {
	Method, RequestURI, Host string
	Header                   http.Header
	Body                     []byte
}

func newUpstream(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *upstreamRecorder {
	u := &upstreamRecorder{handle: handle}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.requests = append(u.requests, &recorded{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		if u.handle != nil {
			u.handle(w, r, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamRecorder) last(t testing.TB) *recorded {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.requests[len(u.requests)-1]
}

// errorCode returns the error.code of an OpenAI-shaped error body.
func errorCode(t testing.TB, body []byte) string {
	t.Helper()
	var b api.Body
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Code == nil {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	return *b.Error.Code
}

var errRefused = errors.New("refused")

// config for all four prefixes pointed at one upstream.
func allPrefixes(base string) string {
	return "passthrough:\n" +
		"  anthropic: {api_base: " + base + ", api_key: sk-ant-provider}\n" +
		"  gemini: {api_base: " + base + ", api_key: gemini-provider-key}\n" +
		"  bedrock: {api_base: " + base + ", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n"
}

func contains(haystack, needle string) bool { return strings.Contains(haystack, needle) }
