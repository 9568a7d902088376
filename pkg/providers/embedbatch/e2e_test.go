package embedbatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// The end-to-end suite: the OpenAI Go SDK against the whole gateway (both
// backends), whose Bedrock, Vertex AI, Gemini and Cohere deployments point
// at one local stand-in that speaks each provider's wire format and checks
// each call's credential.

const (
	e2eKeyID   = "AKIDE2EEMBED"
	e2eSecret  = "e2e-aws-secret"
	geminiKey  = "AIza-e2e"
	cohereKey  = "co-e2e"
	vertexProj = "acme-search"
)

// providers is the stand-in for all four providers.
type providersStandIn struct {
	*httptest.Server
	t      *testing.T
	tokens *googletest.TokenServer
	mu     sync.Mutex
	paths  []string
}

func newStandIn(t *testing.T) *providersStandIn {
	p := &providersStandIn{t: t, tokens: googletest.NewTokenServer(t)}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// fails returns the failure a text asks for: "fail-400", "fail-403",
// "slow".
func fails(text string) string {
	if strings.HasPrefix(text, "fail-") || text == "slow" {
		return text
	}
	return ""
}

func (p *providersStandIn) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	path := r.URL.EscapedPath()
	p.mu.Lock()
	p.paths = append(p.paths, path)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil || r.Method != http.MethodPost {
		p.t.Errorf("stand-in: %s %s %s", r.Method, path, raw)
	}
	// Each provider's credential, then its texts.
	family, ok := p.authorize(w, r, path, raw)
	if !ok {
		return
	}
	texts := standInTexts(family, body)
	if failed(w, family, texts) {
		return
	}
	w.Write(standInAnswer(w, family, body, texts, standInDimensions(body)))
}

// authorize checks the call's credential as its provider does, answering
// the provider's refusal; it returns the provider's family.
func (p *providersStandIn) authorize(w http.ResponseWriter, r *http.Request, path string, raw []byte) (family string, ok bool) {
	switch {
	case strings.HasPrefix(path, "/model/"):
		family = "bedrock"
		if _, err := bedrocktest.Verify(r, raw, func(id string) (string, string, bool) { return e2eSecret, "", id == e2eKeyID }); err != nil {
			w.WriteHeader(403)
			io.WriteString(w, `{"message":"The security token included in the request is invalid."}`)
			return "", false
		}
	case strings.HasSuffix(path, ":predict"):
		family = "vertex"
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !p.tokens.Valid(token) || !strings.HasPrefix(path, "/v1/projects/"+vertexProj+"/locations/us-central1/publishers/google/models/") {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
			return "", false
		}
	case strings.HasSuffix(path, ":batchEmbedContents"):
		family = "gemini"
		if r.Header.Get("X-Goog-Api-Key") != geminiKey {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`)
			return "", false
		}
	case path == "/v2/embed":
		family = "cohere"
		if r.Header.Get("Authorization") != "Bearer "+cohereKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"id":"x","message":"invalid api token"}`)
			return "", false
		}
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"message":"no such path"}`)
		return "", false
	}
	return family, true
}

// standInTexts are the texts of a call of family.
func standInTexts(family string, body map[string]any) []string {
	var texts []string
	if s, ok := body["inputText"].(string); ok {
		texts = []string{s}
	}
	switch family {
	case "vertex":
		for _, in := range body["instances"].([]any) {
			texts = append(texts, in.(map[string]any)["content"].(string))
		}
	case "gemini":
		for _, req := range body["requests"].([]any) {
			parts := req.(map[string]any)["content"].(map[string]any)["parts"].([]any)
			texts = append(texts, parts[0].(map[string]any)["text"].(string))
		}
	}
	if ts, ok := body["texts"].([]any); ok {
		for _, s := range ts {
			texts = append(texts, s.(string))
		}
	}
	return texts
}

// failed answers the failure a text asks for ("fail-400", "fail-403"),
// or sleeps for "slow".
func failed(w http.ResponseWriter, family string, texts []string) bool {
	for _, s := range texts {
		switch fails(s) {
		case "fail-400":
			w.WriteHeader(400)
			if family == "vertex" || family == "gemini" {
				io.WriteString(w, `{"error":{"code":400,"message":"The input text is not valid for this model.","status":"INVALID_ARGUMENT"}}`)
			} else {
				io.WriteString(w, `{"message":"The input text is not valid for this model."}`)
			}
			return true
		case "fail-403":
			w.WriteHeader(403)
			io.WriteString(w, `{"message":"You don't have access to the model with the specified model ID."}`)
			return true
		case "slow":
			time.Sleep(time.Second)
		}
	}
	return false
}

// standInDimensions is the vectors' size the call asks for.
func standInDimensions(body map[string]any) int {
	dims := 32 // the providers' defaults are larger; small keeps the stand-in cheap
	for _, k := range []string{"dimensions", "output_dimension"} {
		if d, ok := body[k].(float64); ok {
			dims = int(d)
		}
	}
	if params, ok := body["parameters"].(map[string]any); ok {
		dims = int(params["outputDimensionality"].(float64))
	}
	if reqs, ok := body["requests"].([]any); ok {
		if d, ok := reqs[0].(map[string]any)["outputDimensionality"].(float64); ok {
			dims = int(d)
		}
	}
	return dims
}

// standInAnswer is the answer of family to the texts.
func standInAnswer(w http.ResponseWriter, family string, body map[string]any, texts []string, dims int) []byte {
	var b []byte
	switch family {
	case "bedrock":
		if len(texts) == 1 && body["inputText"] != nil {
			b = fmt.Appendf(b, `{"embedding":%s,"inputTextTokenCount":%d}`, embedtest.AppendFloats(nil, embedtest.Vector(texts[0], dims)), 2)
			break
		}
		w.Header().Set(bedrock.InputTokenHeader, strconv.Itoa(2*len(texts)))
		b = append(b, `{"id":"x","embeddings":{"float":[`...)
		for i, s := range texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = embedtest.AppendFloats(b, embedtest.Vector(s, dims))
		}
		b = append(b, `]},"response_type":"embeddings_by_type"}`...)
	case "vertex":
		b = append(b, `{"predictions":[`...)
		for i, s := range texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"embeddings":{"statistics":{"truncated":false,"token_count":2},"values":%s}}`, embedtest.AppendFloats(nil, embedtest.Vector(s, dims)))
		}
		b = append(b, "]}"...)
	case "gemini":
		b = append(b, `{"embeddings":[`...)
		for i, s := range texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"values":%s}`, embedtest.AppendFloats(nil, embedtest.Vector(s, dims)))
		}
		b = append(b, "]}"...)
	case "cohere":
		b = append(b, `{"id":"x","embeddings":{"float":[`...)
		for i, s := range texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = embedtest.AppendFloats(b, embedtest.Vector(s, dims))
		}
		b = fmt.Appendf(b, `]},"meta":{"billed_units":{"input_tokens":%d}}}`, 2*len(texts))
	}
	return b
}

func (p *providersStandIn) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.paths)
}

func e2eConfig(u string) string {
	aws := fmt.Sprintf("api_base: %s, aws_region_name: us-east-1, aws_access_key_id: %s, aws_secret_access_key: os.environ/AWS_SECRET", u, e2eKeyID)
	return "model_list:\n" +
		"  - model_name: titan\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, " + aws + "}\n" +
		"  - model_name: titan-v1\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v1, " + aws + "}\n" +
		"  - model_name: bedrock-cohere\n    litellm_params: {model: bedrock/cohere.embed-english-v3, input_type: search_query, " + aws + "}\n" +
		"  - model_name: titan-refused\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, api_base: " + u + ", aws_region_name: us-east-1, aws_access_key_id: AKIDWRONG, aws_secret_access_key: nope}\n" +
		"  - model_name: titan-slow\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, timeout: 0.2, max_retries: 0, " + aws + "}\n" +
		"  - model_name: vertex\n    litellm_params: {model: vertex_ai/text-embedding-005, api_base: " + u + ", vertex_project: " + vertexProj + ", vertex_location: us-central1, vertex_credentials: os.environ/VERTEX_SA}\n" +
		"  - model_name: gemini\n    litellm_params: {model: gemini/gemini-embedding-001, api_base: " + u + ", api_key: os.environ/GEMINI_KEY}\n" +
		"  - model_name: gemini-refused\n    litellm_params: {model: gemini/gemini-embedding-001, api_base: " + u + ", api_key: wrong}\n" +
		"  - model_name: cohere\n    litellm_params: {model: cohere/embed-v4.0, api_base: " + u + ", api_key: os.environ/COHERE_KEY}\n"
}

func checkVectors(t *testing.T, data []openai.Embedding, texts []string, dims int) {
	t.Helper()
	if len(data) != len(texts) {
		t.Fatalf("%d embeddings for %d inputs", len(data), len(texts))
	}
	for i, e := range data {
		want := embedtest.Vector(texts[i], dims)
		if int(e.Index) != i || len(e.Embedding) != dims {
			t.Fatalf("embedding %d: index %d, %d values, want %d", i, e.Index, len(e.Embedding), dims)
		}
		for j := range want {
			if float32(e.Embedding[j]) != want[j] {
				t.Fatalf("embedding %d value %d: %v, want %v (input order lost?)", i, j, e.Embedding[j], want[j])
			}
		}
	}
}

func texts(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s passage %d", prefix, i)
	}
	return out
}

func TestTranslatedEmbeddingsEndToEnd(t *testing.T) {
	u := newStandIn(t)
	env := map[string]string{"AWS_SECRET": e2eSecret, "GEMINI_KEY": geminiKey, "COHERE_KEY": cohereKey, "VERTEX_SA": u.tokens.ServiceAccountJSON("sa-project")}
	gatewaytest.Run(t, gatewaytest.Options{Config: e2eConfig(u.URL), Env: env}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))

		for _, tc := range []struct {
			model      string
			n, dims    int
			defaultDim int
			tokens     int64 // per input; 0: estimated
		}{
			{"titan", 20, 256, 32, 2},
			{"bedrock-cohere", 100, 0, 32, 2},
			{"vertex", 30, 128, 32, 2},
			{"gemini", 120, 64, 32, 0},
			{"cohere", 100, 256, 32, 2},
		} {
			t.Run(tc.model, func(t *testing.T) {
				in := texts(tc.n, tc.model)
				for _, enc := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
					params := openai.EmbeddingNewParams{
						Model: tc.model, EncodingFormat: enc,
						Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: in},
					}
					dims := tc.defaultDim
					if tc.dims > 0 {
						params.Dimensions, dims = openai.Int(int64(tc.dims)), tc.dims
					}
					resp, err := c.Embeddings.New(ctx, params)
					if err != nil {
						t.Fatalf("%s: %v", enc, err)
					}
					// The SDK decodes base64 itself: equal vectors prove
					// sluice's encoding is OpenAI's.
					checkVectors(t, resp.Data, in, dims)
					want := tc.tokens * int64(tc.n)
					if tc.tokens == 0 {
						want = 0
						for _, s := range in {
							want += int64((len(s) + 3) / 4)
						}
					}
					if resp.Usage.PromptTokens != want || resp.Usage.TotalTokens != want {
						t.Errorf("%s: usage %+v, want %d", enc, resp.Usage, want)
					}
				}
			})
		}
		t.Run("input_type", func(t *testing.T) {
			resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "vertex", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("q")}},
				option.WithJSONSet("input_type", "search_query"))
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, resp.Data, []string{"q"}, 32)
		})
		translatedRefusals(t, ctx, u, g, key, c)
	})
}

// translatedRefusals checks what the gateway refuses, and how a
// provider's refusal reaches the client.
func translatedRefusals(t *testing.T, ctx context.Context, u *providersStandIn, g *gatewaytest.Gateway, key string, c openai.Client) {
	for _, tc := range []struct {
		name, body string
		status     int
		code, msg  string
		param      string
	}{
		{"dimensions on titan v1", `{"model":"titan-v1","input":"x","dimensions":256}`, 400, "invalid_value", "does not take 'dimensions'", "dimensions"},
		{"titan v2 dimensions", `{"model":"titan","input":"x","dimensions":100}`, 400, "invalid_value", "256, 512 or 1024", "dimensions"},
		{"token ids", `{"model":"gemini","input":[[1,2,3]]}`, 400, "invalid_value", "text only", "input"},
		{"cohere v3 dimensions", `{"model":"bedrock-cohere","input":"x","dimensions":256}`, 400, "invalid_value", "does not take 'dimensions'", "dimensions"},
		{"provider 400 kept", `{"model":"vertex","input":["ok","fail-400"]}`, 400, "", "The input text is not valid for this model.", ""},
		{"bedrock 400 kept", `{"model":"titan","input":["ok","fail-400"]}`, 400, "", "The input text is not valid for this model.", ""},
		{"provider 403", `{"model":"cohere","input":"fail-403"}`, 502, "upstream_error", "refused the gateway's credential", ""},
		{"signature refused", `{"model":"titan-refused","input":"x"}`, 502, "upstream_error", "refused the gateway's credential", ""},
		{"gemini key refused", `{"model":"gemini-refused","input":"x"}`, 502, "upstream_error", "refused the gateway's credential", ""},
		{"timeout", `{"model":"titan-slow","input":["a","slow"]}`, 504, "upstream_timeout", "in time", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := u.calls()
			resp := g.Do("POST", "/v1/embeddings", key, tc.body)
			if resp.Status != tc.status || resp.ErrorCode(t) != tc.code || !strings.Contains(string(resp.Body), tc.msg) {
				t.Errorf("%d %s; want %d %s saying %q", resp.Status, resp.Body, tc.status, tc.code, tc.msg)
			}
			var e struct {
				Error struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal(resp.Body, &e)
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %s", e.Error.Param, tc.param)
			}
			if tc.status == 400 && tc.code != "" && u.calls() != before {
				t.Error("a request sluice refuses reached the provider")
			}
			for _, secret := range []string{e2eSecret, geminiKey, cohereKey, "PRIVATE KEY"} {
				if strings.Contains(string(resp.Body), secret) {
					t.Errorf("a credential leaked: %s", resp.Body)
				}
			}
		})
	}
	t.Run("sdk sees a refusal", func(t *testing.T) {
		_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "titan-v1", Dimensions: openai.Int(512), Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "dimensions" {
			t.Errorf("%v", err)
		}
	})
}

// The benchmarks below compare a translated answer with the pass-through one
// in one harness: the whole local gateway in process, one 1536-dimension
// answer of the same numbers from a local upstream. cpu-µs/op is the
// process's CPU time (client, gateway and upstream together) per request, so
// the difference between two of them is what sluice spends on top.

// BenchmarkGatewayEmbeddingsPassThrough is the OpenAI pass-through (as
// pkg/embeddings' BenchmarkGatewayEmbeddings): the answer relayed untouched.
func BenchmarkGatewayEmbeddingsPassThrough(b *testing.B) {
	answer := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + strings.Repeat("-0.0123456789,", 1535) + `0.01]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
	cfg := func(base string) string {
		return "model_list:\n  - model_name: emb\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + base + "/v1, api_key: k}\n"
	}
	benchmarkGateway(b, answer, cfg, 1, `"float"`)
}

// BenchmarkGatewayEmbeddingsTitanBase64 is a translated answer: Titan v1's
// 1536 floats, re-encoded as OpenAI base64 by sluice.
func BenchmarkGatewayEmbeddingsTitanBase64(b *testing.B) {
	benchmarkGateway(b, titanAnswer, titanConfig, 1, `"base64"`)
}

// BenchmarkGatewayEmbeddingsTitanFloat is the same answer relayed as floats.
func BenchmarkGatewayEmbeddingsTitanFloat(b *testing.B) {
	benchmarkGateway(b, titanAnswer, titanConfig, 1, `"float"`)
}

// BenchmarkGatewayEmbeddingsTitan16 is 16 inputs: 16 concurrent upstream
// calls behind one request, answered in base64.
func BenchmarkGatewayEmbeddingsTitan16(b *testing.B) {
	benchmarkGateway(b, titanAnswer, titanConfig, 16, `"base64"`)
}

var titanAnswer = []byte(`{"embedding":[` + strings.Repeat("-0.0123456789,", 1535) + `0.01],"inputTextTokenCount":8}`)

func titanConfig(base string) string {
	return "model_list:\n  - model_name: emb\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v1, api_base: " + base +
		", aws_region_name: us-east-1, aws_access_key_id: AKIDBENCH, aws_secret_access_key: s}\n"
}

func benchmarkGateway(b *testing.B, answer []byte, config func(base string) string, n int, encoding string) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}))
	defer up.Close()
	g := gatewaytest.Start(b, gatewaytest.Backends()[0], gatewaytest.Options{Config: config(up.URL)})
	_, key := g.TeamKey()
	inputs, _ := json.Marshal(texts(n, "The food was delicious and the waiter was friendly."))
	body := []byte(`{"model":"emb","input":` + string(inputs) + `,"encoding_format":` + encoding + `}`)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("POST", g.URL+"/v1/embeddings", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := g.Client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil {
			b.Fatalf("%d %v", resp.StatusCode, err)
		}
	}
	b.StopTimer()
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	}
}
