package azure

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

// Real-shaped Azure OpenAI answers.
const (
	embeddingAnswer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAAEAAAEBA"}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`
	accessDenied    = `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`
	notFound        = `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`
)

type received struct {
	method, path, rawPath, query string
	header                       http.Header
	body                         string
}

func server(t *testing.T, status int, body string) (*httptest.Server, *received) {
	t.Helper()
	got := &received{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = received{method: r.Method, path: r.URL.Path, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery, header: r.Header.Clone(), body: string(b)}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestEmbed(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer)
	ep, err := New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "small", Params: config.Params{
		Model: "azure/my embeddings", APIBase: srv.URL + "/", APIKey: "azure-key", APIVersion: "2024-06-01",
	}}, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	req, err := oai.ParseEmbeddingRequest([]byte(`{"model":"small","input":["a","b"],"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ep.(models.Embedder).Embed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if string(b) != embeddingAnswer || ans.Encoding != oai.EncodingBase64 {
		t.Errorf("answer %s (%s)", b, ans.Encoding)
	}
	if got.method != "POST" || got.path != "/openai/deployments/my embeddings/embeddings" ||
		got.rawPath != "/openai/deployments/my%20embeddings/embeddings" || got.query != "api-version=2024-06-01" {
		t.Errorf("request %s %s?%s", got.method, got.rawPath, got.query)
	}
	if got.header.Get("Api-Key") != "azure-key" || got.header.Get("Authorization") != "" || got.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", got.header)
	}
	if got.body != `{"model":"my embeddings","input":["a","b"],"encoding_format":"base64"}` {
		t.Errorf("body %s", got.body)
	}
	if ep.APIBase() != srv.URL {
		t.Errorf("APIBase %s", ep.APIBase())
	}
	if _, ok := ep.(models.Moderator); ok {
		t.Error("Azure OpenAI has no moderations endpoint")
	}
}

func TestDefaultAPIVersion(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer)
	ep, err := New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{
		Model: "azure/emb", APIBase: srv.URL, APIKey: "k",
	}}, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := oai.ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"}`))
	ans, err := ep.(models.Embedder).Embed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if got.query != "api-version="+DefaultAPIVersion {
		t.Errorf("query %s", got.query)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
	}{{401, accessDenied, "401"}, {404, notFound, "DeploymentNotFound"}} {
		srv, _ := server(t, tc.status, tc.body)
		ep, err := New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{
			Model: "azure/emb", APIBase: srv.URL, APIKey: "k",
		}}, embedtest.NoSecrets)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := oai.ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"}`))
		_, err = ep.(models.Embedder).Embed(context.Background(), req)
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Code != tc.code || pe.Message == "" {
			t.Errorf("%d: %v", tc.status, err)
		}
	}
}

func TestOpenRefusals(t *testing.T) {
	for _, tc := range []struct {
		params config.Params
		msg    string
	}{
		{config.Params{Model: "azure/emb", APIKey: "k"}, "no api_base"},
		{config.Params{Model: "azure/emb", APIBase: "https://r.openai.azure.com"}, "no api_key"},
		{config.Params{Model: "azure/emb", APIBase: "r.openai.azure.com", APIKey: "k"}, "not a usable http(s) URL"},
	} {
		_, err := New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: tc.params}, embedtest.NoSecrets)
		if e := api.AsError(err); e.Status != 503 || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%+v: %v", tc.params, err)
		}
	}
}

func TestEnvironmentFallbacks(t *testing.T) {
	srv, got := server(t, 200, embeddingAnswer)
	env := map[string]string{"AZURE_API_BASE": srv.URL, "AZURE_API_KEY": "env-key", "AZURE_API_VERSION": "2024-02-01"}
	ep, err := New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "m", Params: config.Params{Model: "azure/emb"}}, embedtest.Env(env))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := oai.ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"}`))
	ans, err := ep.(models.Embedder).Embed(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if got.path != "/openai/deployments/emb/embeddings" || got.query != "api-version=2024-02-01" || got.header.Get("Api-Key") != "env-key" {
		t.Errorf("received %+v", got)
	}
}
