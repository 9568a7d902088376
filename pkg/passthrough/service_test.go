package passthrough

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// rawRequest sends a request line as written, bypassing every client-side
// normalisation, to the harness handler directly (not through pkg/server's
// path checks), and returns the status and body.
func rawRequest(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", "/", nil)
	req.RequestURI = target
	u, err := req.URL.Parse(target)
	if err != nil {
		return http.StatusBadRequest, "unparseable"
	}
	req.URL = u
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestBadPathsNeverReachTheUpstream(t *testing.T) {
	up := newUpstream(t, nil)
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	for _, target := range []string{
		"/anthropic/v1/%2e%2e/%2e%2e/admin",
		"/anthropic/v1/%2E%2E/admin",
		"/anthropic/v1/..%2Fadmin",
		"/anthropic/v1/a%2F..%2F..%2Fadmin",
		"/anthropic/v1/%2F%2Fevil.com/x",
		"/anthropic/https:%2F%2Fevil.com/v1/messages",
		"/anthropic/http:evil.com",
		"/gemini/v1beta/models/a%5C..%5Cb",
		"/gemini/v1beta/models/a%0d%0aX-Injected:%201",
		"/gemini/v1beta/models/a%00",
		"/bedrock/model/a%2F..%2Fb/converse",
		"/bedrock/model/%2e/converse",
		"/vertex-ai/v1/projects/p/locations/evil.com%2F/x",
		"/vertex_ai/v1/projects/p/locations/a.b/publishers/google/models/m:generateContent",
		"/anthropic/v1/messages?k%zzey=sk-sluice",
	} {
		code, body := rawRequest(t, h, target)
		if code != http.StatusBadRequest || errorCode(t, []byte(body)) != "invalid_value" {
			t.Errorf("%s: %d %s", target, code, body)
		}
	}
	// The absolute form of a request target is refused too.
	req := httptest.NewRequest("GET", "http://evil.com/anthropic/v1/messages", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("absolute form: %d %s", rec.Code, rec.Body)
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("the upstream received %d refused requests", n)
	}
	if code, _ := rawRequest(t, h, "/anthropic/"); code != http.StatusNotFound {
		t.Errorf("no endpoint: %d", code)
	}
	// Legitimate encoded characters pass unchanged.
	if code, body := rawRequest(t, h, "/anthropic/v1/things/a%20b%3Ac@d"); code != 200 {
		t.Fatalf("encoded path refused: %d %s", code, body)
	}
	if got := up.last(t).RequestURI; got != "/v1/things/a%20b%3Ac@d" {
		t.Errorf("forwarded %q", got)
	}
}

func TestOnlyTheProviderCredentialIsForwarded(t *testing.T) {
	up := newUpstream(t, nil)
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	secrets := []string{"sk-sluice-key", "ya29.client", "client-x-api-key", "client-goog", "client-azure", "client-apim", "client-litellm", "AKIDCLIENT", "client-session", "cookie-v"}
	for _, tc := range []struct {
		path, credHeader, credValue string
	}{
		{"/anthropic/v1/messages?key=sk-sluice-key&beta=true", "X-Api-Key", "sk-ant-provider"},
		{"/gemini/v1beta/models/gemini-2.5-flash:generateContent?key=sk-sluice-key&alt=json", "X-Goog-Api-Key", "gemini-provider-key"},
	} {
		resp, body := h.do(t, "POST", tc.path, strings.NewReader(`{"model":"x"}`),
			"X-Sluice-Api-Key", "sk-sluice-key",
			"Authorization", "Bearer ya29.client",
			"X-Api-Key", "client-x-api-key",
			"X-Goog-Api-Key", "client-goog",
			"Api-Key", "client-azure",
			"Ocp-Apim-Subscription-Key", "client-apim",
			"X-Litellm-Api-Key", "client-litellm",
			"X-Amz-Security-Token", "client-session",
			"X-Amz-Date", "20240101T000000Z",
			"Cookie", "session=cookie-v",
			"Proxy-Authorization", "Basic AKIDCLIENT",
			"Connection", "X-Hop",
			"X-Hop", "hop-value",
			"X-Forwarded-For", "10.0.0.1",
			"Accept-Encoding", "gzip",
			"Anthropic-Version", "2023-06-01",
			"Anthropic-Beta", "prompt-caching-2024-07-31",
			"X-Goog-User-Project", "billing-proj",
			"Content-Type", "application/json",
		)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
		got := up.last(t)
		for k, vs := range got.Header {
			for _, v := range vs {
				for _, s := range secrets {
					if strings.Contains(v, s) {
						t.Errorf("%s: header %s carried the client credential %q", tc.path, k, s)
					}
				}
			}
		}
		if strings.Contains(got.RequestURI, "sk-sluice-key") || strings.Contains(got.RequestURI, "key=") {
			t.Errorf("%s: the query carried the key: %s", tc.path, got.RequestURI)
		}
		if v := got.Header.Values(tc.credHeader); len(v) != 1 || v[0] != tc.credValue {
			t.Errorf("%s: %s = %q, want the provider credential", tc.path, tc.credHeader, v)
		}
		for _, gone := range []string{"Authorization", "X-Hop", "X-Forwarded-For", "Accept-Encoding", "X-Amz-Date", "Connection", "Cookie"} {
			if tc.credHeader != gone && got.Header.Get(gone) != "" && !(gone == "Accept-Encoding" && got.Header.Get(gone) == "identity") {
				t.Errorf("%s: %s was forwarded: %q", tc.path, gone, got.Header.Get(gone))
			}
		}
		for _, kept := range []string{"Anthropic-Version", "Anthropic-Beta", "X-Goog-User-Project", "Content-Type"} {
			if got.Header.Get(kept) == "" {
				t.Errorf("%s: provider header %s was dropped", tc.path, kept)
			}
		}
		if string(got.Body) != `{"model":"x"}` {
			t.Errorf("%s: body %q", tc.path, got.Body)
		}
	}
}

func TestNoCredentialsIs503(t *testing.T) {
	up := newUpstream(t, nil)
	// api_base set, no credential anywhere; the environment is empty.
	cfg := "passthrough:\n  anthropic: {api_base: " + up.srv.URL + "}\n  gemini: {api_base: " + up.srv.URL + "}\n" +
		"  vertex_ai: {api_base: " + up.srv.URL + ", vertex_project: p}\n  bedrock: {api_base: " + up.srv.URL + "}\n"
	h := newHarness(t, cfg, nil, nil)
	for _, path := range []string{
		"/anthropic/v1/messages", "/gemini/v1beta/models/m:generateContent",
		"/vertex-ai/v1/projects/p/locations/us-east5/publishers/google/models/m:generateContent",
		"/bedrock/model/m/converse",
	} {
		resp, body := h.do(t, "POST", path+"?key=sk-sluice", strings.NewReader("{}"), "X-Api-Key", "sk-sluice")
		if resp.StatusCode != 503 || errorCode(t, body) != "unavailable" || !strings.Contains(string(body), "no provider credentials configured") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
		ev := h.bus.last(t)
		if ev.Status != logevent.StatusFailure || ev.Passthrough.StatusCode != 503 {
			t.Errorf("%s: event %+v", path, ev.Passthrough)
		}
	}
	if up.hits.Load() != 0 {
		t.Fatal("a request without a provider credential was forwarded")
	}
}

func TestEnvironmentFallbacks(t *testing.T) {
	up := newUpstream(t, nil)
	env := map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_API_BASE": up.srv.URL,
		"GEMINI_API_KEY": "gemini-env", "GEMINI_API_BASE": up.srv.URL + "/g",
		"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_REGION": "eu-west-1",
	}
	h := newHarness(t, "passthrough:\n  bedrock: {api_base: "+up.srv.URL+"}\n", env, nil)
	h.do(t, "GET", "/anthropic/v1/models", nil)
	if got := up.last(t); got.Header.Get("X-Api-Key") != "sk-ant-env" || got.RequestURI != "/v1/models" {
		t.Errorf("anthropic: %s %v", got.RequestURI, got.Header)
	}
	h.do(t, "GET", "/gemini/v1beta/models", nil)
	if got := up.last(t); got.Header.Get("X-Goog-Api-Key") != "gemini-env" || got.RequestURI != "/g/v1beta/models" {
		t.Errorf("gemini: %s %v", got.RequestURI, got.Header)
	}
	h.do(t, "GET", "/bedrock/model/m/invoke", nil)
	if sig, err := bedrocktest.ParseAuthorization(up.last(t).Header.Get("Authorization")); err != nil || sig.AccessKeyID != "AKIDENV" || sig.Region != "eu-west-1" {
		t.Errorf("bedrock: %+v %v", sig, err)
	}
}

func TestGatherPrecedence(t *testing.T) {
	cfg := "model_list:\n" +
		"  - model_name: claude\n    litellm_params: {model: anthropic/claude-x, api_key: from-model-list, use_in_pass_through: true}\n" +
		"  - model_name: g\n    litellm_params: {model: gemini/gemini-x, api_key: gemini-from-model-list, use_in_pass_through: true}\n" +
		"  - model_name: g2\n    litellm_params: {model: gemini/gemini-y, api_key: not-marked}\n" +
		"passthrough:\n  anthropic: {api_key: from-passthrough}\n" +
		"default_vertex_config: {vertex_project: dvc-proj, vertex_location: us-east5, vertex_credentials: /dvc.json}\n"
	h := newHarness(t, cfg, map[string]string{"ANTHROPIC_API_KEY": "from-env", "GEMINI_API_KEY": "gemini-env", "GOOGLE_APPLICATION_CREDENTIALS": "/gac.json"}, nil)
	src := func(p Provider) sources { return h.svc.resolvers[p].src }
	if s := src(Anthropic); s.apiKey != "from-passthrough" || s.where != "passthrough.anthropic" {
		t.Errorf("anthropic: %+v", s)
	}
	if s := src(Gemini); s.apiKey != "gemini-from-model-list" {
		t.Errorf("gemini: %+v", s)
	}
	if s := src(VertexAI); s.vertexProject != "dvc-proj" || s.vertexCredentials != "/dvc.json" || s.vertexLocation != "us-east5" {
		t.Errorf("vertex: %+v", s)
	}
}

func TestBadAPIBaseFailsAtStart(t *testing.T) {
	for _, base := range []string{"ftp://x", "http://", "http://user:pw@host", "http://h/?q=1", "not a url"} {
		cfg, _ := parseConfig("passthrough:\n  anthropic: {api_base: '" + base + "', api_key: k}\n")
		if _, err := New(Options{Config: cfg, Client: http.DefaultClient, Limits: &fakeLimits{}}); err == nil {
			t.Errorf("api_base %q accepted", base)
		}
	}
}

func TestSecretReferencesResolveLazily(t *testing.T) {
	up := newUpstream(t, nil)
	secrets := &fakeSecrets{values: map[string]string{"anthropic-key": "sk-ant-from-sm"}, fail: true}
	h := newHarness(t, "passthrough:\n  anthropic: {api_base: "+up.srv.URL+", api_key: secretsmanager/anthropic-key}\n", nil,
		func(o *Options) { o.Secrets = secrets })
	resp, body := h.do(t, "GET", "/anthropic/v1/models", nil)
	if resp.StatusCode != 503 || strings.Contains(string(body), "anthropic-key") {
		t.Fatalf("secret store down: %d %s", resp.StatusCode, body)
	}
	secrets.fail = false
	if resp, body := h.do(t, "GET", "/anthropic/v1/models", nil); resp.StatusCode != 200 {
		t.Fatalf("after recovery: %d %s", resp.StatusCode, body)
	}
	if up.last(t).Header.Get("X-Api-Key") != "sk-ant-from-sm" {
		t.Error("the secret was not injected")
	}
}

func TestVertexMintsAndCachesTokens(t *testing.T) {
	tokens := googletest.NewTokenServer(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !tokens.Valid(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			http.Error(w, `{"error":{"code":401,"message":"bad token","status":"UNAUTHENTICATED"}}`, 401)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"candidates":[],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":6,"totalTokenCount":10}}`))
	})
	env := map[string]string{"SA": tokens.ServiceAccountJSON("sa-project")}
	h := newHarness(t, "passthrough:\n  vertex_ai: {api_base: "+up.srv.URL+", vertex_credentials: os.environ/SA, vertex_location: europe-west1}\n", env, nil)
	for range 3 {
		resp, body := h.do(t, "POST", "/vertex_ai/v1/publishers/google/models/gemini-2.5-flash:generateContent", strings.NewReader("{}"),
			"Authorization", "Bearer ya29.client", "X-Sluice-Api-Key", "sk-sluice")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if tokens.Issued() != 1 {
		t.Errorf("minted %d tokens for 3 calls, want 1 (cached)", tokens.Issued())
	}
	// The project came from the service account, the location from the config.
	if got := up.last(t).RequestURI; got != "/v1/projects/sa-project/locations/europe-west1/publishers/google/models/gemini-2.5-flash:generateContent" {
		t.Errorf("forwarded %s", got)
	}
	if got := h.limits.recorded(); len(got) != 3 || got[0] != 10 {
		t.Errorf("tokens recorded %v", got)
	}
	tokens.SetUnavailable(true)
	h2 := newHarness(t, "passthrough:\n  vertex_ai: {api_base: "+up.srv.URL+", vertex_credentials: os.environ/SA, vertex_project: p}\n", env, nil)
	resp, body := h2.do(t, "POST", "/vertex-ai/v1/publishers/google/models/m:generateContent", strings.NewReader("{}"))
	if resp.StatusCode != 502 || errorCode(t, body) != "upstream_error" {
		t.Errorf("token endpoint down: %d %s", resp.StatusCode, body)
	}
}

func TestBedrockSignsTheExactBytes(t *testing.T) {
	secret := func(id string) (string, string, bool) { return "sluice-secret", "sluice-session", id == "AKIDSLUICE" }
	var verr atomic.Value
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if _, err := bedrocktest.Verify(r, body, secret); err != nil {
			verr.Store(err.Error())
			http.Error(w, `{"message":"The request signature we calculated does not match"}`, 403)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", "5")
		w.Header().Set("X-Amzn-Bedrock-Output-Token-Count", "7")
		w.Write([]byte(`{"completion":"hi"}`))
	})
	cfg := "passthrough:\n  bedrock: {api_base: " + up.srv.URL + ", aws_region_name: us-west-2, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret, aws_session_token: sluice-session}\n"
	h := newHarness(t, cfg, nil, nil)
	body := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	resp, out := h.do(t, "POST", "/bedrock/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke?trace=1&x-amz-signature=client", strings.NewReader(body),
		"Content-Type", "application/json", "Accept", "application/json", "X-Amzn-Bedrock-Trace", "ENABLED",
		"X-Forwarded-For", "10.1.1.1", "Authorization", "AWS4-HMAC-SHA256 Credential=AKIDCLIENT/20240101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00",
		"X-Amz-Security-Token", "client-session", "X-Sluice-Api-Key", "sk-sluice")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s (verify: %v)", resp.StatusCode, out, verr.Load())
	}
	got := up.last(t)
	if got.RequestURI != "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke?trace=1" || string(got.Body) != body {
		t.Errorf("forwarded %s %q", got.RequestURI, got.Body)
	}
	if got.Header.Get("X-Amzn-Bedrock-Trace") != "ENABLED" || got.Header.Get("X-Amz-Security-Token") != "sluice-session" {
		t.Errorf("headers %v", got.Header)
	}
	if ev := h.bus.last(t); ev.PromptTokens != 5 || ev.CompletionTokens != 7 || ev.Model != "anthropic.claude-3-5-haiku-20241022-v1:0" {
		t.Errorf("event %+v", ev)
	}

	// The default chain is used when nothing is configured, and a chain
	// that finds nothing is a 503.
	chainFails := func(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no IMDS role")
		}), "us-east-1", nil
	}
	h2 := newHarness(t, "passthrough:\n  bedrock: {api_base: "+up.srv.URL+"}\n", nil, func(o *Options) { o.AWSDefaultChain = chainFails })
	before := up.hits.Load()
	resp, out = h2.do(t, "POST", "/bedrock/model/m/converse", strings.NewReader("{}"))
	if resp.StatusCode != 503 || up.hits.Load() != before {
		t.Errorf("chain without credentials: %d %s", resp.StatusCode, out)
	}
}

type fakeSecrets struct {
	values map[string]string
	fail   bool
}

func (f *fakeSecrets) Secret(ctx context.Context, name, key string) (string, error) {
	if f.fail {
		return "", errors.New("secrets manager unavailable")
	}
	v, ok := f.values[name]
	if !ok {
		return "", fmt.Errorf("no secret %s", name)
	}
	return v, nil
}

func TestBodyLimits(t *testing.T) {
	up := newUpstream(t, nil)
	h := newHarness(t, allPrefixes(up.srv.URL), nil, func(o *Options) { o.MaxBody = 1000; o.MaxSignedBody = 500 })
	big := strings.Repeat("x", 1001)
	// Known length: refused before anything is sent.
	resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(big))
	if resp.StatusCode != 413 || errorCode(t, body) != "payload_too_large" {
		t.Errorf("content-length over the limit: %d %s", resp.StatusCode, body)
	}
	// Unknown length (chunked): refused once the stream passes the limit.
	resp, body = h.do(t, "POST", "/anthropic/v1/messages", io.MultiReader(strings.NewReader(big)))
	if resp.StatusCode != 413 {
		t.Errorf("chunked over the limit: %d %s", resp.StatusCode, body)
	}
	// At the limit exactly: fine.
	if resp, body := h.do(t, "POST", "/anthropic/v1/messages", io.MultiReader(strings.NewReader(big[:1000]))); resp.StatusCode != 200 {
		t.Errorf("at the limit: %d %s", resp.StatusCode, body)
	}
	resp, body = h.do(t, "POST", "/bedrock/model/m/invoke", io.MultiReader(strings.NewReader(big[:501])))
	if resp.StatusCode != 413 {
		t.Errorf("bedrock over its limit: %d %s", resp.StatusCode, body)
	}
	// A small body declared at the streamed limit is read whole, within
	// that limit; a small Bedrock body keeps the signed one.
	if resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(big[:1000])); resp.StatusCode != 200 {
		t.Errorf("declared at the limit: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.do(t, "POST", "/bedrock/model/m/invoke", strings.NewReader(big[:501])); resp.StatusCode != 413 {
		t.Errorf("bedrock declared over its limit: %d %s", resp.StatusCode, body)
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/slow-headers":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/stall":
			w.Header().Set("Content-Type", contentSSE)
			w.Write([]byte("data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n"))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, func(o *Options) { o.Timeout = 300 * time.Millisecond; o.IdleTimeout = 150 * time.Millisecond })
	start := time.Now()
	resp, body := h.do(t, "GET", "/anthropic/slow-headers", nil)
	if resp.StatusCode != 504 || errorCode(t, body) != "upstream_timeout" || time.Since(start) > 5*time.Second {
		t.Errorf("slow headers: %d %s after %s", resp.StatusCode, body, time.Since(start))
	}
	// A stream cut by the idle timer is cut for the client too: what came
	// through, then a broken stream, never a clean end.
	start = time.Now()
	stalled, err := h.srv.Client().Get(h.srv.URL + "/anthropic/stall")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(stalled.Body)
	stalled.Body.Close()
	if stalled.StatusCode != 200 || !strings.Contains(string(got), "message_start") || !errors.Is(err, io.ErrUnexpectedEOF) || time.Since(start) > 5*time.Second {
		t.Errorf("stalled stream: %d %q, %v after %s", stalled.StatusCode, got, err, time.Since(start))
	}
	ev := h.bus.last(t)
	if ev.Status != logevent.StatusFailure || ev.PromptTokens != 3 || !strings.Contains(ev.ErrorStr, "sent nothing") {
		t.Errorf("stalled stream event: %+v", ev)
	}
}

func TestUpstreamUnreachableIs502(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	h := newHarness(t, allPrefixes("http://"+addr), nil, nil)
	resp, body := h.do(t, "GET", "/anthropic/v1/models", nil)
	if resp.StatusCode != 502 || errorCode(t, body) != "upstream_error" || strings.Contains(string(body), addr) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestProviderErrorsAreRelayedAsTheyAre(t *testing.T) {
	const errBody = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Request-Id", "req_upstream")
		w.Header().Set("X-Request-Id", "upstream-id")
		w.WriteHeader(429)
		w.Write([]byte(errBody))
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader("{}"))
	if resp.StatusCode != 429 || string(body) != errBody || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("Request-Id") != "req_upstream" {
		t.Errorf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("x-request-id %q is not sluice's", resp.Header.Get("X-Request-Id"))
	}
	ev := h.bus.last(t)
	if ev.Status != logevent.StatusFailure || ev.Passthrough.StatusCode != 429 || !strings.Contains(ev.ErrorStr, "rate_limit_error") {
		t.Errorf("event %+v %+v", ev, ev.Passthrough)
	}
}

func TestEventAndTokensOfAStream(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for _, part := range strings.SplitAfter(anthropicSSE, "\n\n") {
			w.Write([]byte(part))
			w.(http.Flusher).Flush()
		}
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	resp, body := h.do(t, "POST", "/anthropic/v1/messages?beta=true", strings.NewReader(`{"stream":true}`))
	if resp.StatusCode != 200 || string(body) != anthropicSSE {
		t.Fatalf("%d, body relayed changed: %q", resp.StatusCode, body)
	}
	if got := h.limits.recorded(); len(got) != 1 || got[0] != 45 {
		t.Errorf("tokens recorded %v, want [45]", got)
	}
	ev := h.bus.last(t)
	want := logevent.Passthrough{Method: "POST", Path: "/anthropic/v1/messages", StatusCode: 200}
	switch {
	case ev.CallType != logevent.CallPassthrough, ev.Status != logevent.StatusSuccess, !ev.Stream,
		ev.PromptTokens != 30, ev.CompletionTokens != 15, ev.TotalTokens != 45,
		ev.Model != "claude-sonnet-4-5-20250929", ev.CustomLLMProvider != "anthropic",
		*ev.Passthrough != want, ev.Metadata.UserAPIKeyHash != "tok-hash", ev.Metadata.UserAPIKeyTeamID != "team-a",
		ev.Metadata.UserAPIKeyAlias != "ci", ev.Metadata.UserAPIKeyTeamAlias != "search",
		!strings.HasPrefix(ev.ID, "req_"), ev.APIBase != up.srv.URL,
		ev.StartTime <= 0 || ev.EndTime < ev.StartTime || ev.CompletionStartTime < ev.StartTime || ev.CompletionStartTime > ev.EndTime:
		t.Errorf("event %+v passthrough %+v", ev, ev.Passthrough)
	}
}

func TestModelPermissions(t *testing.T) {
	up := newUpstream(t, nil)
	cfg := allPrefixes(up.srv.URL) + "model_list:\n  - model_name: fast\n    litellm_params: {model: gemini/gemini-2.5-flash}\n" +
		"  - model_name: sonnet\n    litellm_params: {model: anthropic/claude-sonnet-4-5}\n"
	h := newHarness(t, cfg, nil, nil)

	p := teamPrincipal("fast", "sonnet")
	h.principal.Store(&p)
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/gemini/v1beta/models/gemini-2.5-flash:generateContent", "{}", 200},                    // allowed by its model_list name
		{"/gemini/v1beta/models/gemini-2.5-pro:generateContent", "{}", 403},                      // not allowed
		{"/bedrock/model/anthropic.claude-v2%3A1/invoke", "{}", 403},                             // not allowed
		{"/anthropic/v1/messages", `{"model":"claude-sonnet-4-5","x":1}`, 200},                   // body model allowed
		{"/anthropic/v1/messages", `{"max_tokens":1,"model":"claude-opus-4"}`, 403},              // body model not allowed
		{"/anthropic/v1/messages", `{"model":"claude-opus-4","Model":"claude-sonnet-4-5"}`, 403}, // keys match exactly
		{"/gemini/v1beta/models%2Fgemini-2.5-pro:generateContent", "{}", 403},                    // an encoded slash hides nothing
	} {
		before := up.hits.Load()
		resp, body := h.do(t, "POST", tc.path, strings.NewReader(tc.body), "Content-Type", "application/json")
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, body)
		}
		if tc.status == 403 && (up.hits.Load() != before || errorCode(t, body) != "permission_denied") {
			t.Errorf("%s: forbidden call reached the upstream", tc.path)
		}
		if tc.status == 200 && tc.body != "" && string(up.last(t).Body) != tc.body {
			t.Errorf("%s: body changed: %q", tc.path, up.last(t).Body)
		}
	}
}

// TestStreamsAreFlushedAsTheyArrive proves the relay does not buffer: the
// upstream sends its second event only after the client has read the first.
func TestStreamsAreFlushedAsTheyArrive(t *testing.T) {
	for _, ct := range []string{contentSSE, contentEventStream, "application/json"} {
		t.Run(ct, func(t *testing.T) {
			clientGotFirst := make(chan struct{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", ct) // no Content-Length: chunked
				w.Write([]byte("first\n\n"))
				w.(http.Flusher).Flush()
				select {
				case <-clientGotFirst:
				case <-time.After(5 * time.Second):
					t.Error("the first event did not reach the client before the stream ended")
				}
				w.Write([]byte("second\n\n"))
			})
			h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
			resp, err := h.srv.Client().Get(h.srv.URL + "/gemini/v1beta/models/m:streamGenerateContent")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "first\n" {
				t.Fatalf("first line %q %v", line, err)
			}
			close(clientGotFirst)
			rest, _ := io.ReadAll(br)
			if string(rest) != "\nsecond\n\n" {
				t.Errorf("rest %q", rest)
			}
		})
	}
}

func TestClientDisconnectCancelsTheUpstreamCall(t *testing.T) {
	upstreamDone := make(chan error, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentSSE)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				upstreamDone <- err
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				upstreamDone <- r.Context().Err()
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/anthropic/v1/stream", nil)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call kept running after the client left")
	}
}

// countingWriter discards what it is written, counting it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func parseConfig(yaml string) (*config.Config, error) {
	return config.Parse([]byte(yaml), func(string) string { return "" })
}
