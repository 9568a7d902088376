package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
)

// Real-shaped answers (OpenAI API reference).
const (
	embeddingAnswer = `{
  "object": "list",
  "data": [{"object": "embedding", "index": 0, "embedding": [0.0023064255, -0.009327292, -0.0028842222]}],
  "model": "text-embedding-3-small",
  "usage": {"prompt_tokens": 8, "total_tokens": 8}
}`
	moderationAnswer = `{"id":"modr-970d409ef3bef3b70c73d8232df86e7d","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{"harassment":false,"harassment/threatening":false,"hate":false,"hate/threatening":false,"illicit":false,"illicit/violent":false,"self-harm":false,"self-harm/instructions":false,"self-harm/intent":false,"sexual":false,"sexual/minors":false,"violence":false,"violence/graphic":false},"category_scores":{"harassment":0.000012,"harassment/threatening":0.0000014,"hate":0.0000034,"hate/threatening":2.5e-7,"illicit":0.0000087,"illicit/violent":0.000004,"self-harm":0.0000011,"self-harm/instructions":2.2e-7,"self-harm/intent":3.5e-7,"sexual":0.0000065,"sexual/minors":5.9e-7,"violence":0.00001,"violence/graphic":0.0000016},"category_applied_input_types":{"harassment":["text"],"harassment/threatening":["text"],"hate":["text"],"hate/threatening":["text"],"illicit":["text"],"illicit/violent":["text"],"self-harm":["text"],"self-harm/instructions":["text"],"self-harm/intent":["text"],"sexual":["text"],"sexual/minors":["text"],"violence":["text"],"violence/graphic":["text"]}}]}`
	invalidKeyAnswer = `{"error":{"message":"Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	rateLimitAnswer  = `{"error":{"message":"Rate limit reached for text-embedding-3-small in organization org-x on requests per min (RPM): Limit 3000, Used 3000, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	dimensionsAnswer = `{"error":{"message":"This model does not support specifying dimensions.","type":"invalid_request_error","param":null,"code":null}}`
)

// received is what the fake provider saw.
type received struct {
	method, path, query string
	header              http.Header
	body                string
}

// server is an OpenAI stand-in that records each request and answers with
// status and body.
func server(t *testing.T, status int, body string, header http.Header) (*httptest.Server, *received) {
	t.Helper()
	got := &received{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(b)}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func open(t *testing.T, name string, params config.Params) models.Endpoint {
	t.Helper()
	ep, err := New(name, http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "small", Params: params}, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func embeddingRequest(t *testing.T, body string) *oai.EmbeddingRequest {
	t.Helper()
	req, err := oai.ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestEmbed(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer, nil)
	ep := open(t, "openai", config.Params{
		Model: "openai/text-embedding-3-small", APIKey: "sk-test", APIBase: srv.URL + "/v1/",
		Extra: map[string]any{"organization": "org-123"},
	})
	if ep.APIBase() != srv.URL+"/v1" {
		t.Errorf("APIBase %q", ep.APIBase())
	}
	req := embeddingRequest(t, `{"model":"small","input":["hello","world"],"encoding_format":"base64","dimensions":256,"user":"u-1"}`)
	ans, err := ep.(models.Embedder).Embed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if string(body) != embeddingAnswer || ans.Encoding != oai.EncodingBase64 || ans.ContentLength != int64(len(embeddingAnswer)) {
		t.Errorf("answer %q encoding %q length %d", body, ans.Encoding, ans.ContentLength)
	}
	if got.method != "POST" || got.path != "/v1/embeddings" || got.query != "" {
		t.Errorf("request %s %s?%s", got.method, got.path, got.query)
	}
	for k, want := range map[string]string{
		"Authorization": "Bearer sk-test", "Content-Type": "application/json",
		"Openai-Organization": "org-123", "Accept": "application/json",
	} {
		if v := got.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	want := `{"model":"text-embedding-3-small","input":["hello","world"],"encoding_format":"base64","dimensions":256,"user":"u-1"}`
	if got.body != want {
		t.Errorf("body %s\nwant %s", got.body, want)
	}
}

func TestModerate(t *testing.T) {
	srv, got := server(t, 200, moderationAnswer, nil)
	ep := open(t, "openai", config.Params{Model: "openai/omni-moderation-latest", APIKey: "sk-test", APIBase: srv.URL + "/v1"})
	req, err := oai.ParseModerationRequest([]byte(`{"input":"I want to hug you"}`))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ep.(models.Moderator).Moderate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if string(body) != moderationAnswer {
		t.Errorf("answer %s", body)
	}
	if got.method != "POST" || got.path != "/v1/moderations" || got.header.Get("Authorization") != "Bearer sk-test" ||
		got.body != `{"model":"omni-moderation-latest","input":"I want to hug you"}` {
		t.Errorf("received %+v", got)
	}
}

func TestCompatibleServers(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer, nil)
	// A local vLLM: its own api_base, no key, no Authorization header.
	ep := open(t, "hosted_vllm", config.Params{Model: "hosted_vllm/BAAI/bge-small-en-v1.5", APIBase: srv.URL + "/v1"})
	if _, ok := ep.(models.Moderator); ok {
		t.Error("an OpenAI-compatible host claims OpenAI's moderations")
	}
	ans, err := ep.(models.Embedder).Embed(context.Background(), embeddingRequest(t, `{"model":"bge","input":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if _, ok := got.header["Authorization"]; ok {
		t.Error("Authorization sent without a key")
	}
	if got.path != "/v1/embeddings" || got.body != `{"model":"BAAI/bge-small-en-v1.5","input":"x"}` {
		t.Errorf("received %s %s", got.path, got.body)
	}
	// openai/ with an api_base is any OpenAI-compatible server, keyless too.
	ep = open(t, "openai", config.Params{Model: "openai/nomic-embed-text", APIBase: srv.URL + "/v1"})
	if _, ok := ep.(models.Moderator); !ok {
		t.Error("openai/ lost moderations")
	}
}

func TestOpenRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, provider string
		params         config.Params
		msg            string
	}{
		{"openai without a key", "openai", config.Params{Model: "openai/text-embedding-3-small"}, "no api_key configured"},
		{"mistral without a key", "mistral", config.Params{Model: "mistral/mistral-embed"}, "no api_key configured"},
		{"vllm without a base", "hosted_vllm", config.Params{Model: "hosted_vllm/x"}, "no api_base configured"},
		{"base not a URL", "openai", config.Params{Model: "openai/x", APIKey: "k", APIBase: "localhost:8000/v1"}, "not a usable http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.provider, http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: tc.params}, embedtest.NoSecrets)
			e := api.AsError(err)
			if e.Status != 503 || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %v", err)
			}
		})
	}
	_, err := New("openai", http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{Model: "openai/x", APIKey: "secretsmanager/k"}},
		models.Resolver{Secret: func(context.Context, string) (string, error) { return "", errors.New("access denied") }})
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("secret failure: %v", err)
	}
}

func TestProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		header http.Header
		check  func(t *testing.T, e *models.ProviderError)
	}{
		{"invalid key", 401, invalidKeyAnswer, nil, func(t *testing.T, e *models.ProviderError) {
			if e.Status != 401 || e.Code != "invalid_api_key" {
				t.Errorf("%+v", e)
			}
		}},
		{"rate limited", 429, rateLimitAnswer, http.Header{"Retry-After": {"20"}, "Retry-After-Ms": {"19500"}}, func(t *testing.T, e *models.ProviderError) {
			if e.Status != 429 || e.Type != "requests" || e.RetryAfter.Milliseconds() != 19500 {
				t.Errorf("%+v", e)
			}
		}},
		{"bad request", 400, dimensionsAnswer, nil, func(t *testing.T, e *models.ProviderError) {
			if e.Status != 400 || e.Message != "This model does not support specifying dimensions." || e.Type != "invalid_request_error" {
				t.Errorf("%+v", e)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := server(t, tc.status, tc.body, tc.header)
			ep := open(t, "openai", config.Params{Model: "openai/text-embedding-3-small", APIKey: "sk-wrong", APIBase: srv.URL + "/v1"})
			_, err := ep.(models.Embedder).Embed(context.Background(), embeddingRequest(t, `{"model":"m","input":"x"}`))
			var pe *models.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a ProviderError", err)
			}
			tc.check(t, pe)
		})
	}
}

func TestNonJSONAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>login</html>")
	}))
	defer srv.Close()
	ep := open(t, "openai", config.Params{Model: "openai/x", APIKey: "k", APIBase: srv.URL})
	_, err := ep.(models.Embedder).Embed(context.Background(), embeddingRequest(t, `{"model":"m","input":"x"}`))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "text/html") {
		t.Errorf("got %v", err)
	}
}

func TestConnectionError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	ep := open(t, "openai", config.Params{Model: "openai/x", APIKey: "k", APIBase: base})
	_, err := ep.(models.Embedder).Embed(context.Background(), embeddingRequest(t, `{"model":"m","input":"x"}`))
	var pe *models.ProviderError
	if err == nil || errors.As(err, &pe) {
		t.Errorf("got %v; want a transport error", err)
	}
}

func TestKeyFromTheEnvironment(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer, nil)
	env := map[string]string{"OPENAI_API_KEY": "sk-env", "TOGETHERAI_API_KEY": "tg-env"}
	// A hosted API (no api_base) takes LiteLLM's variable when api_key is unset.
	ep, err := New("together_ai", http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{Model: "together_ai/m2-bert"}}, embedtest.Env(env))
	if err != nil || ep.APIBase() != "https://api.together.xyz/v1" {
		t.Fatalf("%v %v", ep, err)
	}
	if h := ep.(*endpoint).header.Get("Authorization"); h != "Bearer tg-env" {
		t.Errorf("Authorization %q", h)
	}
	// A server of the operator's own never gets the provider's key.
	ep, err = New("openai", http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{Model: "openai/x", APIBase: srv.URL + "/v1"}}, embedtest.Env(env))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ep.(models.Embedder).Embed(context.Background(), embeddingRequest(t, `{"model":"m","input":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if _, ok := got.header["Authorization"]; ok {
		t.Errorf("OPENAI_API_KEY was sent to a custom api_base: %v", got.header)
	}
	// The deployment's own key wins.
	ep, _ = New("openai", http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{Model: "openai/x", APIKey: "sk-own"}}, embedtest.Env(env))
	if h := ep.(*moderatingEndpoint).header.Get("Authorization"); h != "Bearer sk-own" {
		t.Errorf("Authorization %q", h)
	}
}
