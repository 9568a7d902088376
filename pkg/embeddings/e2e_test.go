package embeddings_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// upstream is an OpenAI and Azure OpenAI stand-in: it checks each call's
// credential, answers deterministic vectors in the encoding asked for, and
// records what it received. Provider model names select misbehaviour.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
	flaky int
}

type call struct {
	Path, Query, Auth, APIKey string
	Body                      map[string]any
}

const upstreamKey = "sk-upstream-secret"

// vector is the deterministic embedding of input i with dims values.
func vector(i, dims int) []float32 {
	v := make([]float32, dims)
	for j := range v {
		v[j] = float32(math.Sin(float64(i*1000+j))) / 3
	}
	return v
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	u.mu.Lock()
	u.calls = append(u.calls, call{Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), APIKey: r.Header.Get("Api-Key"), Body: body})
	u.mu.Unlock()
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
	}
	azure := strings.HasPrefix(r.URL.Path, "/openai/deployments/")
	switch {
	case azure && r.Header.Get("Api-Key") != "azure-key", !azure && r.Header.Get("Authorization") != "Bearer "+upstreamKey:
		fail(401, "invalid_request_error", "Incorrect API key provided: sk-wro**********. You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	model, _ := body["model"].(string)
	switch model {
	case "bad-request":
		fail(400, "invalid_request_error", "This model does not support specifying dimensions.")
		return
	case "slow":
		time.Sleep(2 * time.Second)
	case "flaky":
		u.mu.Lock()
		u.flaky++
		n := u.flaky
		u.mu.Unlock()
		if n%2 == 1 {
			w.Header().Set("Retry-After", "0")
			fail(503, "server_error", "The server is overloaded.")
			return
		}
	}
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		u.embeddings(w, body)
		return
	}
	fail(404, "invalid_request_error", "Unknown path "+r.URL.Path)
}

func (u *upstream) embeddings(w http.ResponseWriter, body map[string]any) {
	n := 1
	if in, ok := body["input"].([]any); ok {
		n = len(in)
		if _, tokens := in[0].(float64); tokens {
			n = 1
		}
	}
	dims := 8
	if d, ok := body["dimensions"].(float64); ok {
		dims = int(d)
	}
	b := []byte(`{"object":"list","data":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"object":"embedding","index":%d,"embedding":`, i)
		v := vector(i, dims)
		if body["encoding_format"] == "base64" {
			raw := make([]byte, 4*dims)
			for j, f := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			b = strconv.AppendQuote(b, base64.StdEncoding.EncodeToString(raw))
		} else {
			js, _ := json.Marshal(v)
			b = append(b, js...)
		}
		b = append(b, '}')
	}
	b = fmt.Appendf(b, `],"model":%q,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, body["model"], 2*n, 2*n)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

func (u *upstream) last() call {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.calls) == 0 {
		return call{}
	}
	return u.calls[len(u.calls)-1]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.calls)
}

func config(u *upstream) string {
	openai := func(name, model, extra string) string {
		if !strings.Contains(extra, "api_key") {
			extra += ", api_key: os.environ/UPSTREAM_KEY"
		}
		return fmt.Sprintf("  - model_name: %s\n    litellm_params: {model: openai/%s, api_base: %s/v1%s}\n", name, model, u.URL, extra)
	}
	return "model_list:\n" +
		openai("small", "text-embedding-3-small", "") +
		openai("refused", "text-embedding-3-small", ", api_key: sk-wrong") +
		openai("picky", "bad-request", "") +
		openai("slow", "slow", ", timeout: 0.2, max_retries: 0") +
		openai("flaky", "flaky", ", max_retries: 1") +
		openai("limited", "text-embedding-3-small", ", rpm: 1") +
		"  - model_name: azure-small\n    litellm_params: {model: azure/emb-dep, api_base: " + u.URL + ", api_key: azure-key, api_version: '2024-10-21'}\n" +
		"  - model_name: keyless\n    litellm_params: {model: openai/text-embedding-3-small}\n" +
		"  - model_name: gone\n    litellm_params: {model: openai/x, api_base: 'http://127.0.0.1:1/v1', api_key: k, max_retries: 0}\n"
}

func client(g *gatewaytest.Gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
}

func checkVectors(t *testing.T, data []openai.Embedding, n, dims int) {
	t.Helper()
	if len(data) != n {
		t.Fatalf("%d embeddings, want %d", len(data), n)
	}
	for i, e := range data {
		want := vector(i, dims)
		if int(e.Index) != i || len(e.Embedding) != dims {
			t.Fatalf("embedding %d: index %d, %d values", i, e.Index, len(e.Embedding))
		}
		for j := range want {
			if float32(e.Embedding[j]) != want[j] {
				t.Fatalf("embedding %d value %d: %v, want %v", i, j, e.Embedding[j], want[j])
			}
		}
	}
}

func TestEmbeddingsEndToEnd(t *testing.T) {
	u := newUpstream(t)
	gatewaytest.Run(t, gatewaytest.Options{Config: config(u), Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		embeddingsAnswered(t, g, u, key)
		embeddingsRefused(t, g, key)
	})
}

// embeddingsAnswered holds the calls answered, through the official client
// and raw: what the provider received and what the caller got.
func embeddingsAnswered(t *testing.T, g *gatewaytest.Gateway, u *upstream, key string) {
	ctx := context.Background()
	c := client(g, key)

	t.Run("sdk float", func(t *testing.T) {
		resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "small", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "world"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, resp.Data, 2, 8)
		if resp.Usage.PromptTokens != 4 || resp.Usage.TotalTokens != 4 || resp.Model != "text-embedding-3-small" {
			t.Errorf("usage %+v model %s", resp.Usage, resp.Model)
		}
		got := u.last()
		if got.Path != "/v1/embeddings" || got.Auth != "Bearer "+upstreamKey || got.Body["model"] != "text-embedding-3-small" || got.Body["encoding_format"] != "float" {
			t.Errorf("upstream received %+v", got)
		}
	})
	t.Run("sdk default encoding", func(t *testing.T) {
		resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, resp.Data, 1, 8)
	})
	t.Run("sdk base64", func(t *testing.T) {
		resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "small", EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64, Dimensions: openai.Int(16),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}, {4}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, resp.Data, 3, 16)
		if got := u.last(); got.Body["encoding_format"] != "base64" || got.Body["dimensions"] != float64(16) {
			t.Errorf("upstream received %+v", got.Body)
		}
	})
	t.Run("azure", func(t *testing.T) {
		resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "azure-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 2, 3}}})
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, resp.Data, 1, 8)
		got := u.last()
		if got.Path != "/openai/deployments/emb-dep/embeddings" || got.Query != "api-version=2024-10-21" || got.APIKey != "azure-key" || got.Auth != "" || got.Body["model"] != "emb-dep" {
			t.Errorf("upstream received %+v", got)
		}
	})
	t.Run("raw answer and headers", func(t *testing.T) {
		resp := g.Do("POST", "/v1/embeddings", key, `{"model":"small","input":"x","encoding_format":"base64"}`)
		if resp.Status != 200 || resp.Header.Get("X-Sluice-Overhead-Ms") == "" || !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
			t.Fatalf("%d %v %s", resp.Status, resp.Header, resp.Body)
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(len(resp.Body)) || !strings.Contains(string(resp.Body), `"embedding":"`) {
			t.Errorf("%v %s", resp.Header, resp.Body)
		}
		if strings.Contains(string(resp.Body), upstreamKey) {
			t.Error("the provider key leaked")
		}
	})
	t.Run("retried after a 503", func(t *testing.T) {
		before := u.count()
		resp := g.Do("POST", "/v1/embeddings", key, `{"model":"flaky","input":"x"}`)
		if resp.Status != 200 || u.count()-before != 2 {
			t.Errorf("%d %s after %d upstream calls", resp.Status, resp.Body, u.count()-before)
		}
	})
}

// embeddingsRefused holds every bad input, refusal, provider failure and
// limit with its OpenAI-style error, as raw calls and the client see them.
func embeddingsRefused(t *testing.T, g *gatewaytest.Gateway, key string) {
	ctx := context.Background()
	smallOnly := g.NewKey(g.NewTeam(map[string]any{"models": []string{"small"}}), nil)
	storetest.WithinOneLimitWindow(t, 10*time.Second)
	oneRPM := g.NewKey(g.NewTeam(nil), map[string]any{"rpm_limit": 1})

	for _, tc := range []struct {
		name, key, body string
		status          int
		code, msg       string
	}{
		{"missing model", key, `{"input":"x"}`, 400, "missing_required_parameter", "'model'"},
		{"empty input", key, `{"model":"small","input":""}`, 400, "invalid_value", "empty string"},
		{"empty array", key, `{"model":"small","input":[]}`, 400, "invalid_value", "empty array"},
		{"too many inputs", key, `{"model":"small","input":[` + strings.Repeat(`"a",`, 2048) + `"a"]}`, 400, "invalid_value", "at most 2048"},
		{"wrong input type", key, `{"model":"small","input":{"text":"x"}}`, 400, "invalid_value", "must be a string"},
		{"unknown model", key, `{"model":"nope","input":"x"}`, 404, "model_not_found", "'nope'"},
		{"forbidden model", smallOnly, `{"model":"azure-small","input":"x"}`, 403, "permission_denied", "'azure-small'"},
		{"invalid encoding_format", key, `{"model":"small","input":"x","encoding_format":"int8"}`, 400, "invalid_value", "'float' or 'base64'"},
		{"invalid dimensions", key, `{"model":"small","input":"x","dimensions":0}`, 400, "invalid_value", "positive integer"},
		{"invalid JSON", key, `{"model":`, 400, "invalid_json", "not valid JSON"},
		{"provider 400 kept", key, `{"model":"picky","input":"x"}`, 400, "", "This model does not support specifying dimensions."},
		{"credential refused", key, `{"model":"refused","input":"x"}`, 502, "upstream_error", "credential"},
		{"provider timeout", key, `{"model":"slow","input":"x"}`, 504, "upstream_timeout", "in time"},
		{"no credential", key, `{"model":"keyless","input":"x"}`, 503, "unavailable", "api_key"},
		{"connection refused", key, `{"model":"gone","input":"x"}`, 502, "upstream_error", "could not reach"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Do("POST", "/v1/embeddings", tc.key, tc.body)
			if resp.Status != tc.status || resp.ErrorCode(t) != tc.code || !strings.Contains(string(resp.Body), tc.msg) {
				t.Errorf("%d %s; want %d %s containing %q", resp.Status, resp.Body, tc.status, tc.code, tc.msg)
			}
			if strings.Contains(string(resp.Body), "sk-wro") || strings.Contains(string(resp.Body), upstreamKey) {
				t.Errorf("a credential leaked: %s", resp.Body)
			}
		})
	}
	t.Run("key rpm limit", func(t *testing.T) {
		if resp := g.Do("POST", "/v1/embeddings", oneRPM, `{"model":"small","input":"x"}`); resp.Status != 200 {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		resp := g.Do("POST", "/v1/embeddings", oneRPM, `{"model":"small","input":"x"}`)
		if resp.Status != 429 || resp.ErrorCode(t) != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%d %v %s", resp.Status, resp.Header, resp.Body)
		}
	})
	t.Run("deployment rpm limit", func(t *testing.T) {
		if resp := g.Do("POST", "/v1/embeddings", key, `{"model":"limited","input":"x"}`); resp.Status != 200 {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		resp := g.Do("POST", "/v1/embeddings", key, `{"model":"limited","input":"x"}`)
		if resp.Status != 429 || resp.ErrorCode(t) != "rate_limit_exceeded" || !strings.Contains(string(resp.Body), "'limited'") {
			t.Errorf("%d %s", resp.Status, resp.Body)
		}
	})
	t.Run("sdk sees errors", func(t *testing.T) {
		sc := client(g, smallOnly)
		_, err := sc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "azure-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "permission_denied" {
			t.Errorf("%v", err)
		}
	})
}

// BenchmarkGatewayEmbeddings measures the whole local gateway (middleware,
// key lookup, router, relay) in front of a 1536-dimension upstream; the
// client and the upstream share the process, so compare runs, not totals.
func BenchmarkGatewayEmbeddings(b *testing.B) {
	answer := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + strings.Repeat("-0.0123456789,", 1535) + `0.01]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}))
	defer up.Close()
	cfg := "model_list:\n  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: k}\n"
	g := gatewaytest.Start(b, gatewaytest.Backends()[0], gatewaytest.Options{Config: cfg})
	_, key := g.TeamKey()
	body := []byte(`{"model":"text-embedding-3-small","input":"The food was delicious and the waiter was friendly."}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("POST", g.URL+"/v1/embeddings", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := g.Client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(answer)) {
			b.Fatalf("%d %d", resp.StatusCode, n)
		}
	}
}
