package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// fakeProvider answers from a script per provider model and records calls.
type fakeProvider struct {
	mu      sync.Mutex
	opens   map[string]int
	calls   []string
	openErr error
	// answer returns the outcome of call n (0-based) to model.
	answer func(ctx context.Context, model string, n int) error
	perN   map[string]int
}

func newFake(answer func(ctx context.Context, model string, n int) error) *fakeProvider {
	return &fakeProvider{opens: map[string]int{}, perN: map[string]int{}, answer: answer}
}

func (f *fakeProvider) Open(ctx context.Context, d config.Deployment, resolve Resolver) (Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens[d.Params.ProviderModel()]++
	if f.openErr != nil {
		return nil, f.openErr
	}
	key, err := resolve.Value(ctx, d.Params.APIKey)
	if err != nil {
		return nil, err
	}
	return &fakeEndpoint{f: f, model: d.Params.ProviderModel(), key: key}, nil
}

type fakeEndpoint struct {
	f     *fakeProvider
	model string
	key   string
}

func (e *fakeEndpoint) APIBase() string { return "https://fake/" + e.model }

func (e *fakeEndpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*Answer, error) {
	e.f.mu.Lock()
	e.f.calls = append(e.f.calls, e.model)
	n := e.f.perN[e.model]
	e.f.perN[e.model]++
	e.f.mu.Unlock()
	if err := e.f.answer(ctx, e.model, n); err != nil {
		return nil, err
	}
	return &Answer{Body: io.NopCloser(strings.NewReader(`{"model":"` + e.model + `"}`)), ContentLength: -1, Encoding: req.Encoding()}, nil
}

func (f *fakeProvider) callsTo(model string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == model {
			n++
		}
	}
	return n
}

// countingLimiter is a store.Limiter with one window that never turns, so
// tests do not depend on the clock.
type countingLimiter struct {
	mu   sync.Mutex
	used map[string]int64
}

func (l *countingLimiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range takes {
		if l.used[scope+":"+t.Counter]+t.N > t.Limit {
			return store.Decision{Refused: t.Counter, RetryAfter: 42 * time.Second}, nil
		}
	}
	for _, t := range takes {
		l.used[scope+":"+t.Counter] += t.N
	}
	return store.Decision{Allowed: true, Remaining: takes[0].Limit - l.used[scope+":"+takes[0].Counter]}, nil
}

type fakeKeyTokens struct{ tokens int64 }

func (a *fakeKeyTokens) RecordTokens(ctx context.Context, p auth.Principal, n int64) error {
	a.tokens += n
	return nil
}

type harness struct {
	router *Router
	fake   *fakeProvider
	sleeps []time.Duration
	keys   *fakeKeyTokens
	now    time.Time
}

func newHarness(t *testing.T, yaml string, answer func(ctx context.Context, model string, n int) error) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{fake: newFake(answer), keys: &fakeKeyTokens{}, now: time.Unix(1_700_000_000, 0)}
	rng := rand.New(rand.NewPCG(1, 2))
	h.router, err = NewRouter(Options{
		Config:    cfg,
		Limiter:   &countingLimiter{used: map[string]int64{}},
		KeyTokens: h.keys,
		Providers: map[string]Provider{"fake": h.fake},
		Rand:      rng.Float64,
		Now:       func() time.Time { return h.now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.sleeps = append(h.sleeps, d)
			h.now = h.now.Add(d)
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) embed(t *testing.T, p auth.Principal, model string) (*Reply, error) {
	t.Helper()
	rep, _, err := h.embedWaited(t, p, model)
	return rep, err
}

// embedWaited is embed, also returning what the call recorded as waits.
func (h *harness) embedWaited(t *testing.T, p auth.Principal, model string) (*Reply, time.Duration, error) {
	t.Helper()
	ctx := api.WithStart(context.Background(), time.Now())
	req, err := oai.ParseEmbeddingRequest([]byte(`{"model":"` + model + `","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.router.Embed(ctx, p, req)
	if rep == nil {
		t.Fatal("nil reply")
	}
	if err == nil {
		rep.Answer.Body.Close()
	}
	return rep, api.Waited(ctx), err
}

var admin = auth.Principal{Admin: true, TeamID: auth.AdminTeam}

func ok(context.Context, string, int) error { return nil }

func status(code int, retryAfter time.Duration) error {
	return &ProviderError{Provider: "fake", Status: code, Message: fmt.Sprintf("status %d", code), RetryAfter: retryAfter}
}

func wantAPIError(t *testing.T, err error, status int, code string) *api.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %d %s", status, code)
	}
	e := api.AsError(err)
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s (%v); want %d %s", e.Status, e.Code, err, status, code)
	}
	return e
}

func TestWeightedPick(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, weight: 1}}
  - {model_name: m, litellm_params: {model: fake/b, weight: 3}}
  - {model_name: m, litellm_params: {model: fake/c}}
`, ok)
	for range 4000 {
		if _, err := h.embed(t, admin, "m"); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := h.fake.callsTo("a"), h.fake.callsTo("b"), h.fake.callsTo("c")
	if c != 0 {
		t.Errorf("deployment without weight picked %d times while the others are healthy", c)
	}
	if ratio := float64(b) / float64(a); ratio < 2.6 || ratio > 3.4 {
		t.Errorf("a=%d b=%d: ratio %.2f, want about 3", a, b, ratio)
	}
}

func TestWeights(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []float64
	}{
		{"- {model_name: m, litellm_params: {model: fake/a, rpm: 10}}\n- {model_name: m, litellm_params: {model: fake/b, rpm: 30, tpm: 5}}", []float64{10, 30}},
		{"- {model_name: m, litellm_params: {model: fake/a, tpm: 100}}\n- {model_name: m, litellm_params: {model: fake/b}}", []float64{100, 0}},
		{"- {model_name: m, litellm_params: {model: fake/a, rpm: 5, weight: 2}}\n- {model_name: m, litellm_params: {model: fake/b, rpm: 50}}", []float64{2, 0}},
		{"- {model_name: m, litellm_params: {model: fake/a}}\n- {model_name: m, litellm_params: {model: fake/b}}", []float64{0, 0}},
	} {
		h := newHarness(t, "model_list:\n"+indent(tc.yaml), ok)
		if got := h.router.groups["m"].weights; fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: weights %v, want %v", tc.yaml, got, tc.want)
		}
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func TestUniformPickUsesEveryDeployment(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
  - {model_name: m, litellm_params: {model: fake/b}}
`, ok)
	for range 200 {
		h.embed(t, admin, "m")
	}
	if a, b := h.fake.callsTo("a"), h.fake.callsTo("b"); a < 70 || b < 70 {
		t.Errorf("a=%d b=%d", a, b)
	}
}

func TestDeploymentRPMLimit(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, rpm: 1}}
  - {model_name: m, litellm_params: {model: fake/b, rpm: 1}}
`, ok)
	for range 2 {
		if _, err := h.embed(t, admin, "m"); err != nil {
			t.Fatal(err)
		}
	}
	if h.fake.callsTo("a") != 1 || h.fake.callsTo("b") != 1 {
		t.Errorf("calls %v: each deployment should have taken one", h.fake.calls)
	}
	_, err := h.embed(t, admin, "m")
	e := wantAPIError(t, err, 429, "rate_limit_exceeded")
	if e.Type != api.TypeRequests || e.RetryAfter != 42*time.Second || !strings.Contains(e.Message, "'m'") {
		t.Errorf("limit error %+v", e)
	}
	if len(h.fake.calls) != 2 {
		t.Errorf("a limited call reached the provider: %v", h.fake.calls)
	}
}

func TestDeploymentTPMCountsFinishedTokens(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, tpm: 10}}
`, ok)
	rep, err := h.embed(t, admin, "m")
	if err != nil {
		t.Fatal(err)
	}
	h.router.Finish(context.Background(), admin, rep, 15)
	if h.keys.tokens != 15 {
		t.Errorf("key/team tokens recorded: %d", h.keys.tokens)
	}
	_, err = h.embed(t, admin, "m")
	if e := wantAPIError(t, err, 429, "rate_limit_exceeded"); e.Type != api.TypeTokens {
		t.Errorf("type %s", e.Type)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
`, func(ctx context.Context, model string, n int) error {
		if n == 0 {
			return status(429, 3*time.Second)
		}
		return nil
	})
	rep, waited, err := h.embedWaited(t, admin, "m")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 2 || len(h.sleeps) != 1 || h.sleeps[0] != 3*time.Second {
		t.Errorf("attempts %d sleeps %v", rep.Attempts, h.sleeps)
	}
	if waited < 3*time.Second {
		t.Errorf("waited %s should include the retry wait", waited)
	}
}

func TestRetryBacksOffExponentially(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, max_retries: 3}}
`, func(ctx context.Context, model string, n int) error { return status(503, 0) })
	rep, err := h.embed(t, admin, "m")
	e := wantAPIError(t, err, 502, "upstream_error")
	if !strings.Contains(e.Message, "503") || rep.Attempts != 4 || len(h.sleeps) != 3 {
		t.Fatalf("%v; attempts %d sleeps %v", e, rep.Attempts, h.sleeps)
	}
	for i, d := range h.sleeps {
		base := backoffBase << i
		if d < base/2 || d > base {
			t.Errorf("retry %d waited %s, want within [%s, %s]", i+1, d, base/2, base)
		}
	}
}

func TestMaxRetriesZero(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, max_retries: 0}}
`, func(ctx context.Context, model string, n int) error { return status(500, 0) })
	rep, err := h.embed(t, admin, "m")
	wantAPIError(t, err, 502, "upstream_error")
	if rep.Attempts != 1 || len(h.sleeps) != 0 {
		t.Errorf("attempts %d sleeps %v", rep.Attempts, h.sleeps)
	}
}

func TestLongRetryAfterGoesBackToTheClient(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
`, func(ctx context.Context, model string, n int) error { return status(429, time.Minute) })
	_, err := h.embed(t, admin, "m")
	e := wantAPIError(t, err, 429, "rate_limit_exceeded")
	if e.RetryAfter != time.Minute || len(h.sleeps) != 0 || h.fake.callsTo("a") != 1 || strings.Contains(e.Message, "status 429") {
		t.Errorf("%+v sleeps %v calls %v", e, h.sleeps, h.fake.calls)
	}
}

func TestFailoverToAnotherDeploymentWithoutWaiting(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, weight: 1000}}
  - {model_name: m, litellm_params: {model: fake/b, weight: 1}}
`, func(ctx context.Context, model string, n int) error {
		if model == "a" {
			return status(500, 0)
		}
		return nil
	})
	rep, err := h.embed(t, admin, "m")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Target.Model != "b" || rep.Attempts != 2 || len(h.sleeps) != 0 {
		t.Errorf("target %+v attempts %d sleeps %v", rep.Target, rep.Attempts, h.sleeps)
	}
}

func TestCooldown(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, weight: 1000}}
  - {model_name: m, litellm_params: {model: fake/b, weight: 1}}
router_settings: {cooldown_time: 30}
`, func(ctx context.Context, model string, n int) error {
		if model == "a" {
			return status(429, 0)
		}
		return nil
	})
	h.embed(t, admin, "m") // a answers 429: it cools down at once
	for range 5 {
		if _, err := h.embed(t, admin, "m"); err != nil {
			t.Fatal(err)
		}
	}
	if a := h.fake.callsTo("a"); a != 1 {
		t.Errorf("a was called %d times while cooling down", a)
	}
	h.now = h.now.Add(31 * time.Second)
	h.embed(t, admin, "m")
	if a := h.fake.callsTo("a"); a != 2 {
		t.Errorf("a was not tried again after its cooldown (%d calls)", a)
	}
}

func TestCooldownAfterAllowedFails(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, weight: 1000, max_retries: 0}}
  - {model_name: m, litellm_params: {model: fake/b, weight: 1, max_retries: 0}}
router_settings: {allowed_fails: 2}
`, func(ctx context.Context, model string, n int) error {
		if model == "a" {
			return status(500, 0)
		}
		return nil
	})
	for range 6 {
		h.embed(t, admin, "m")
	}
	// Three failures (more than the two allowed) cool a down; a lone
	// deployment that is cooling would still be tried, but b is healthy.
	if a := h.fake.callsTo("a"); a != 3 {
		t.Errorf("a called %d times, want 3", a)
	}
}

func TestFallbacks(t *testing.T) {
	yaml := `
model_list:
  - {model_name: a, litellm_params: {model: fake/a, max_retries: 0}}
  - {model_name: b, litellm_params: {model: fake/b}}
  - {model_name: c, litellm_params: {model: fake/c}}
router_settings:
  fallbacks: [{a: [b, c]}]
`
	t.Run("to the first that answers", func(t *testing.T) {
		h := newHarness(t, yaml, func(ctx context.Context, model string, n int) error {
			if model == "a" {
				return status(500, 0)
			}
			return nil
		})
		rep, err := h.embed(t, admin, "a")
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Fallback || rep.Target.ModelGroup != "b" || rep.Attempts != 2 {
			t.Errorf("%+v", rep)
		}
	})
	t.Run("skips a model the key may not use", func(t *testing.T) {
		h := newHarness(t, yaml, func(ctx context.Context, model string, n int) error {
			if model == "a" {
				return status(500, 0)
			}
			return nil
		})
		p := auth.Principal{TeamID: "t", Key: &auth.KeyInfo{Token: "k", Models: []string{"a", "c"}}}
		rep, err := h.embed(t, p, "a")
		if err != nil || rep.Target.ModelGroup != "c" || h.fake.callsTo("b") != 0 {
			t.Errorf("%+v %v calls %v", rep, err, h.fake.calls)
		}
	})
	t.Run("all fail: the requested model's error", func(t *testing.T) {
		h := newHarness(t, yaml, func(ctx context.Context, model string, n int) error {
			if model == "a" {
				return status(500, 0)
			}
			return status(400, 0)
		})
		_, err := h.embed(t, admin, "a")
		if e := wantAPIError(t, err, 502, "upstream_error"); !strings.Contains(e.Message, "'a'") {
			t.Errorf("%v", e)
		}
		if h.fake.callsTo("b") != 1 || h.fake.callsTo("c") != 1 {
			t.Errorf("calls %v", h.fake.calls)
		}
	})
	t.Run("a request error is not retried elsewhere", func(t *testing.T) {
		h := newHarness(t, yaml, func(ctx context.Context, model string, n int) error {
			return &ProviderError{Provider: "fake", Status: 400, Message: "This model does not support dimensions.", Param: "dimensions", Code: "invalid_value"}
		})
		rep, err := h.embed(t, admin, "a")
		e := wantAPIError(t, err, 400, "invalid_value")
		if e.Message != "This model does not support dimensions." || e.Param != "dimensions" || e.Type != api.TypeInvalidRequest {
			t.Errorf("%+v", e)
		}
		if rep.Attempts != 1 || len(h.fake.calls) != 1 {
			t.Errorf("a 400 was retried: %v", h.fake.calls)
		}
	})
}

func TestTimeout(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, timeout: 0.05, max_retries: 1}}
`, func(ctx context.Context, model string, n int) error {
		<-ctx.Done()
		return fmt.Errorf("post: %w", ctx.Err())
	})
	start := time.Now()
	rep, err := h.embed(t, admin, "m")
	wantAPIError(t, err, 504, "upstream_timeout")
	if rep.Attempts != 2 || time.Since(start) > 5*time.Second {
		t.Errorf("attempts %d in %s", rep.Attempts, time.Since(start))
	}
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestTransportErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, 502, "upstream_error"},
		{&net.OpError{Op: "read", Err: netTimeout{}}, 504, "upstream_timeout"},
	} {
		h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, max_retries: 1}}
`, func(context.Context, string, int) error { return tc.err })
		rep, err := h.embed(t, admin, "m")
		wantAPIError(t, err, tc.status, tc.code)
		if rep.Attempts != 2 {
			t.Errorf("%v: %d attempts, want a retry", tc.err, rep.Attempts)
		}
	}
}

func TestPermissionAndExistence(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
  - {model_name: other, litellm_params: {model: fake/b}}
`, ok)
	limited := auth.Principal{TeamID: "t", Key: &auth.KeyInfo{Token: "k", Models: []string{"m"}}, Team: &auth.Team{TeamID: "t"}}
	_, err := h.embed(t, limited, "other")
	wantAPIError(t, err, 403, "permission_denied")
	teamLimited := auth.Principal{TeamID: "t", Key: &auth.KeyInfo{Token: "k"}, Team: &auth.Team{TeamID: "t", Models: []string{"other"}}}
	_, err = h.embed(t, teamLimited, "m")
	wantAPIError(t, err, 403, "permission_denied")
	_, err = h.embed(t, admin, "nope")
	if e := wantAPIError(t, err, 404, "model_not_found"); e.Param != "model" {
		t.Errorf("%+v", e)
	}
	if len(h.fake.calls) != 0 {
		t.Errorf("refused calls reached the provider: %v", h.fake.calls)
	}
}

func TestCredentialRefused(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, weight: 1000}}
  - {model_name: m, litellm_params: {model: fake/b, weight: 1}}
`, func(ctx context.Context, model string, n int) error {
		return &ProviderError{Provider: "fake", Status: 401, Message: "Incorrect API key provided: sk-abc***xyz"}
	})
	rep, err := h.embed(t, admin, "m")
	e := wantAPIError(t, err, 502, "upstream_error")
	if strings.Contains(e.Message, "sk-abc") || !strings.Contains(e.Message, "credential") {
		t.Errorf("message %q", e.Message)
	}
	if rep.Attempts != 2 || h.fake.callsTo("a") != 1 || h.fake.callsTo("b") != 1 || len(h.sleeps) != 0 {
		t.Errorf("a refused credential is retried on the others once each: %v", h.fake.calls)
	}
}

func TestOpen(t *testing.T) {
	yaml := `
model_list:
  - {model_name: m, litellm_params: {model: fake/a, api_key: secretsmanager/openai}}
`
	h := newHarness(t, yaml, ok)
	// No secret store locally: resolving the key fails, is not kept, and is a 503.
	_, err := h.embed(t, admin, "m")
	wantAPIError(t, err, 503, "unavailable")
	_, err = h.embed(t, admin, "m")
	wantAPIError(t, err, 503, "unavailable")
	if h.fake.opens["a"] != 2 {
		t.Errorf("a failed open was kept: %d opens", h.fake.opens["a"])
	}

	h = newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: fake/a}}\n", ok)
	for range 3 {
		if _, err := h.embed(t, admin, "m"); err != nil {
			t.Fatal(err)
		}
	}
	if h.fake.opens["a"] != 1 {
		t.Errorf("opened %d times, want once", h.fake.opens["a"])
	}

	h = newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: fake/a}}\n", ok)
	h.fake.openErr = api.Unavailable("no api_key")
	_, err = h.embed(t, admin, "m")
	if e := wantAPIError(t, err, 503, "unavailable"); e.Message != "no api_key" {
		t.Errorf("%+v", e)
	}

	h = newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: bedrock/x}}\n", ok)
	_, err = h.embed(t, admin, "m")
	if e := wantAPIError(t, err, 503, "unavailable"); !strings.Contains(e.Message, "bedrock") {
		t.Errorf("%+v", e)
	}
}

func TestUnsupportedCall(t *testing.T) {
	h := newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: fake/a}}\n", ok)
	req, _ := oai.ParseModerationRequest([]byte(`{"model":"m","input":"x"}`))
	_, err := h.router.Moderate(context.Background(), admin, req)
	if e := wantAPIError(t, err, 400, "invalid_value"); !strings.Contains(e.Message, "does not support moderations") {
		t.Errorf("%+v", e)
	}
}

func TestAttemptTimeoutCoversTheBody(t *testing.T) {
	h := newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: fake/a, timeout: 0.05}}\n", ok)
	var seen context.Context
	h.router.groups["m"].deployments[0].provider = providerFunc(func(ctx context.Context) (*Answer, error) {
		seen = ctx
		return &Answer{Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	req, _ := oai.ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"}`))
	rep, err := h.router.Embed(context.Background(), admin, req)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Err() != nil {
		t.Fatal("the attempt's context ended before the body was read")
	}
	rep.Answer.Body.Close()
	if seen.Err() == nil {
		t.Error("closing the body did not release the attempt's context")
	}
}

// providerFunc is a Provider whose endpoint embeds with f.
type providerFunc func(ctx context.Context) (*Answer, error)

func (f providerFunc) Open(context.Context, config.Deployment, Resolver) (Endpoint, error) {
	return funcEndpoint(f), nil
}

type funcEndpoint func(ctx context.Context) (*Answer, error)

func (funcEndpoint) APIBase() string { return "" }
func (f funcEndpoint) Embed(ctx context.Context, _ *oai.EmbeddingRequest) (*Answer, error) {
	return f(ctx)
}

// TestAttemptUnderASoonerDeadlineKeepsTheCallersContext: a call whose
// context ends before the deployment's timeout would (a Lambda invocation's
// deadline) is bounded by that deadline alone, and closing its body is
// still safe; a later deadline gets the deployment's own timeout.
func TestAttemptUnderASoonerDeadlineKeepsTheCallersContext(t *testing.T) {
	h := newHarness(t, "model_list:\n  - {model_name: m, litellm_params: {model: fake/a, timeout: 60}}\n", ok)
	var seen context.Context
	h.router.groups["m"].deployments[0].provider = providerFunc(func(ctx context.Context) (*Answer, error) {
		seen = ctx
		return &Answer{Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	req, _ := oai.ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"}`))
	for _, tc := range []struct {
		in       time.Duration
		ownBound bool
	}{{time.Second, false}, {time.Hour, true}} {
		ctx, cancel := context.WithTimeout(context.Background(), tc.in)
		rep, err := h.router.Embed(ctx, admin, req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := seen.Deadline()
		want, _ := ctx.Deadline()
		if tc.ownBound {
			want = time.Now().Add(60 * time.Second)
		}
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Errorf("caller's deadline in %s: the attempt's is %s, want about %s", tc.in, got.Format(time.TimeOnly), want.Format(time.TimeOnly))
		}
		if (seen == ctx) == tc.ownBound {
			t.Errorf("caller's deadline in %s: attempt context is the caller's: %v", tc.in, seen == ctx)
		}
		rep.Answer.Body.Close()
		if tc.ownBound && seen.Err() == nil {
			t.Error("closing the body did not release the attempt's context")
		}
		cancel()
	}
}
