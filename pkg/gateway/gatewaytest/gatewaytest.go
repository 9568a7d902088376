// Package gatewaytest runs the whole gateway in-process for end-to-end tests,
// on every storage backend: each case is written once and runs on the
// embedded adapters and on the AWS adapters (against moto_server when
// SLUICE_TEST_AWS_ENDPOINT is set; make test sets it).
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/handoff"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
	"github.com/sluice-gateway/sluice/pkg/store/local"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Backend is a storage backend an end-to-end case runs on.
type Backend struct {
	Name string
	Open func(t testing.TB) *store.Backend
}

// Backends returns every backend: local, then aws.
func Backends() []Backend {
	return []Backend{
		{Name: config.BackendLocal, Open: openLocal},
		{Name: config.BackendAWS, Open: awstest.Backend},
	}
}

func openLocal(t testing.TB) *store.Backend {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatalf("open local backend: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Options configure a test gateway.
type Options struct {
	// Config is the YAML config document.
	Config string
	// Env is what os.environ/ references in Config resolve against.
	Env map[string]string
	// Settings adjusts the settings before the gateway is built.
	Settings func(*config.Settings)
	// Now, when set, is the services' clock (to test expiry); it must be
	// safe for concurrent use.
	Now func() time.Time
	// Backend, when set, adjusts the storage backend before the gateway is
	// built on it (a test wraps the limiter to record what it counts).
	Backend func(*store.Backend)
	// Batches, when set, adjusts the batch engine's options.
	Batches func(*batches.Options)
	// Jobs names jobs of the jobs table to run in the background, as the
	// local process runs them (gateway.RunJob), until the test ends.
	Jobs []string
	// Metrics adjusts the options of the gateway's metrics, which are on
	// as in the local process (Services.Metrics).
	Metrics func(*metrics.Options)
	// Tracer, when set, makes the gateway's traces (off otherwise).
	Tracer *traces.Tracer
}

// Gateway is a running gateway.
type Gateway struct {
	URL       string
	MasterKey string
	Backend   *store.Backend
	Services  *server.Services
	Client    *http.Client
	t         testing.TB
}

// Run runs f once per backend, each as a subtest with its own gateway.
func Run(t *testing.T, opts Options, f func(t *testing.T, g *Gateway)) {
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			f(t, Start(t, b, opts))
		})
	}
}

// Start starts a gateway on backend b, stopped when the test ends.
func Start(t testing.TB, b Backend, opts Options) *Gateway {
	t.Helper()
	getenv := func(k string) string { return opts.Env[k] }
	settings, err := config.SettingsFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	settings.Backend = b.Name
	settings.DataDir = t.TempDir()
	if opts.Settings != nil {
		opts.Settings(&settings)
	}
	cfg, err := config.Parse([]byte(opts.Config), getenv)
	if err != nil {
		t.Fatalf("parse test config: %v", err)
	}
	backend := b.Open(t)
	if opts.Backend != nil {
		opts.Backend(backend)
	}
	master := auth.NewKey()
	var mopts metrics.Options
	if opts.Metrics != nil {
		opts.Metrics(&mopts)
	}
	m := metrics.New(cfg, mopts)
	instrumented := m.Instrument(backend, b.Name)
	// As the local process wires it (functions/local): log events reach a
	// delivery job running here in memory.
	instrumented.Bus = handoff.Wrap(instrumented.Bus)
	svcs, err := server.NewServices(server.Deps{Settings: settings, Config: cfg, Backend: instrumented, MasterKey: master, Now: opts.Now, Getenv: getenv, Batches: opts.Batches,
		Metrics: m, Tracer: opts.Tracer})
	if err != nil {
		t.Fatalf("build services: %v", err)
	}
	for _, name := range opts.Jobs {
		RunJob(t, svcs, name)
	}
	h, err := server.Handler(svcs, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Gateway{URL: srv.URL, MasterKey: master, Backend: backend, Services: svcs, Client: srv.Client(), t: t}
}

// Connect returns a Gateway for a sluice already running at url (another
// process: a test that kills and restarts it), for the same helpers; its
// Backend and Services are nil.
func Connect(t testing.TB, url, masterKey string) *Gateway {
	return &Gateway{URL: url, MasterKey: masterKey, Client: &http.Client{Timeout: 30 * time.Second}, t: t}
}

// RunJob runs the job named name over s in the background, as the local
// process does, until the test ends (or the returned stop is called).
func RunJob(t testing.TB, s *server.Services, name string) (stop func()) {
	t.Helper()
	j, ok := server.LookupJob(name)
	if !ok {
		t.Fatalf("no job %q in the jobs table", name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gateway.RunJob(ctx, s, j); err != nil {
			t.Errorf("job %s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map (failing the test if it is not an object).
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// ErrorCode returns error.code of an OpenAI error body ("" if absent).
func (r Response) ErrorCode(t testing.TB) string {
	t.Helper()
	var b struct {
		Error struct {
			Code    *string `json:"code"`
			Message string  `json:"message"`
			Type    string  `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Error.Message == "" || b.Error.Type == "" {
		t.Fatalf("response %d is not an OpenAI error body: %s", r.Status, r.Body)
	}
	if b.Error.Code == nil {
		return ""
	}
	return *b.Error.Code
}

// Do sends a request with key as a Bearer token (none if empty). A string or
// []byte body is sent as is; anything else is encoded as JSON.
func (g *Gateway) Do(method, path, key string, body any, headers ...string) Response {
	g.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.URL+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// NewTeam creates a team with the master key and returns its id.
func (g *Gateway) NewTeam(fields map[string]any) string {
	g.t.Helper()
	resp := g.Do("POST", "/team/new", g.MasterKey, fields)
	if resp.Status != http.StatusOK {
		g.t.Fatalf("POST /team/new: %d %s", resp.Status, resp.Body)
	}
	return resp.JSON(g.t)["team_id"].(string)
}

// NewKey creates a key for team with extra fields and returns the raw key.
func (g *Gateway) NewKey(team string, fields map[string]any) string {
	g.t.Helper()
	body := map[string]any{"team_id": team}
	for k, v := range fields {
		body[k] = v
	}
	resp := g.Do("POST", "/key/generate", g.MasterKey, body)
	if resp.Status != http.StatusOK {
		g.t.Fatalf("POST /key/generate: %d %s", resp.Status, resp.Body)
	}
	return resp.JSON(g.t)["key"].(string)
}

// TeamKey creates a fresh team and a key for it, returning both.
func (g *Gateway) TeamKey() (team, key string) {
	g.t.Helper()
	team = g.NewTeam(map[string]any{"team_alias": "test"})
	return team, g.NewKey(team, nil)
}
