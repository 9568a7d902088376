package vertex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

type predictCall struct {
	Path, Auth string
	Body       struct {
		Instances []struct {
			Content  string `json:"content"`
			TaskType string `json:"task_type"`
		} `json:"instances"`
		Parameters map[string]any `json:"parameters"`
	}
}

// fakeVertex answers predict like the text-embedding models do, checking
// that each call's bearer token came from the local token endpoint.
type fakeVertex struct {
	*httptest.Server
	tokens *googletest.TokenServer
	fail   atomic.Pointer[string] // a content that gets a 400

	mu       sync.Mutex
	calls    []predictCall
	inFlight embedtest.InFlight
	delay    time.Duration
}

func newFakeVertex(t *testing.T, delay time.Duration) *fakeVertex {
	f := &fakeVertex{tokens: googletest.NewTokenServer(t), delay: delay}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer f.inFlight.Enter()()
		var c predictCall
		c.Path, c.Auth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &c.Body); err != nil || r.Method != "POST" {
			t.Errorf("vertex: %s %s", r.Method, raw)
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		token, ok := strings.CutPrefix(c.Auth, "Bearer ")
		if !ok || !f.tokens.Valid(token) {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token.","status":"UNAUTHENTICATED"}}`)
			return
		}
		time.Sleep(f.delay)
		dims := 768
		if d, ok := c.Body.Parameters["outputDimensionality"].(float64); ok {
			dims = int(d)
		}
		b := []byte(`{"predictions":[`)
		for i, in := range c.Body.Instances {
			if bad := f.fail.Load(); bad != nil && in.Content == *bad {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"code":400,"message":"Unable to submit request because the input token count is 20712 but the model supports up to 20000. Reduce the input token count and try again.","status":"INVALID_ARGUMENT"}}`)
				return
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"embeddings":{"statistics":{"truncated":false,"token_count":%d},"values":[`, len(strings.Fields(in.Content))+1)
			for j, v := range embedtest.Vector(in.Content, dims) {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			}
			b = append(b, "]}}"...)
		}
		b = append(b, `],"metadata":{"billableCharacterCount":42}}`...)
		w.Write(b)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVertex) received() []predictCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]predictCall(nil), f.calls...)
}

func (f *fakeVertex) open(t *testing.T, model string, params func(*config.Params)) models.Embedder {
	t.Helper()
	p := config.Params{Model: "vertex_ai/" + model, APIBase: f.URL, VertexProject: "acme-prod", VertexLocation: "europe-west4",
		VertexCredentials: f.tokens.ServiceAccountJSON("sa-project")}
	if params != nil {
		params(&p)
	}
	return embedtest.Open(t, New(providers.NewHTTPClient()), config.Deployment{ModelName: "emb", Params: p})
}

type answer struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
	} `json:"usage"`
}

func embed(t *testing.T, e models.Embedder, body string) (answer, *models.Answer, error) {
	t.Helper()
	req, err := oai.ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := e.Embed(context.Background(), req)
	if err != nil {
		return answer{}, nil, err
	}
	defer ans.Body.Close()
	var a answer
	if err := json.NewDecoder(ans.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a, ans, nil
}

func inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("passage %d of the corpus", i)
	}
	return out
}

func body(texts []string, extra string) string {
	in, _ := json.Marshal(texts)
	return fmt.Sprintf(`{"model":"emb","input":%s%s}`, in, extra)
}

func TestPredict(t *testing.T) {
	f := newFakeVertex(t, 30*time.Millisecond)
	e := f.open(t, "text-embedding-005", nil)
	texts := inputs(300)
	a, ans, err := embed(t, e, body(texts, `,"dimensions":64,"input_type":"search_query"`))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Data) != 300 || a.Model != "text-embedding-005" || ans.UsageEstimated || ans.Encoding != oai.EncodingFloat {
		t.Fatalf("%d embeddings, model %s, estimated %v", len(a.Data), a.Model, ans.UsageEstimated)
	}
	var tokens int64
	for i, d := range a.Data {
		if d.Index != i || !reflect.DeepEqual(d.Embedding, embedtest.Vector(texts[i], 64)) {
			t.Fatalf("embedding %d is not the vector of input %d", d.Index, i)
		}
		tokens += int64(len(strings.Fields(texts[i])) + 1)
	}
	if a.Usage.PromptTokens != tokens {
		t.Errorf("usage %d, want the sum of token_count %d", a.Usage.PromptTokens, tokens)
	}
	calls := f.received()
	var sizes []int
	for _, c := range calls {
		if c.Path != "/v1/projects/acme-prod/locations/europe-west4/publishers/google/models/text-embedding-005:predict" {
			t.Errorf("path %s", c.Path)
		}
		if !reflect.DeepEqual(c.Body.Parameters, map[string]any{"outputDimensionality": float64(64)}) {
			t.Errorf("parameters %v", c.Body.Parameters)
		}
		for _, in := range c.Body.Instances {
			if in.TaskType != "RETRIEVAL_QUERY" {
				t.Errorf("task_type %q, want input_type search_query as RETRIEVAL_QUERY", in.TaskType)
			}
		}
		sizes = append(sizes, len(c.Body.Instances))
	}
	if len(sizes) != 2 || sizes[0]+sizes[1] != 300 || max(sizes[0], sizes[1]) != MaxInstances {
		t.Errorf("batches %v, want 250 + 50", sizes)
	}
	if f.inFlight.Peak() != 2 {
		t.Errorf("peak %d calls in flight, want both batches together", f.inFlight.Peak())
	}
	if f.tokens.Issued() != 1 {
		t.Errorf("%d tokens minted for one request's calls, want 1 (cached)", f.tokens.Issued())
	}
}

func TestGeminiEmbeddingOnePerCall(t *testing.T) {
	f := newFakeVertex(t, 0)
	e := f.open(t, "gemini-embedding-001", func(p *config.Params) { p.Extra = map[string]any{"task_type": "SEMANTIC_SIMILARITY"} })
	texts := inputs(5)
	a, _, err := embed(t, e, body(texts, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Data) != 5 {
		t.Fatalf("%d embeddings", len(a.Data))
	}
	calls := f.received()
	if len(calls) != 5 {
		t.Fatalf("%d calls, want one per input (the model takes one instance)", len(calls))
	}
	for _, c := range calls {
		if len(c.Body.Instances) != 1 || c.Body.Instances[0].TaskType != "SEMANTIC_SIMILARITY" || c.Body.Parameters != nil {
			t.Errorf("call %+v", c.Body)
		}
	}
}

func TestByteBound(t *testing.T) {
	f := newFakeVertex(t, 0)
	e := f.open(t, "text-multilingual-embedding-002", nil)
	big := strings.Repeat("долгий текст ", 1000) // 24 KB
	if _, _, err := embed(t, e, body([]string{big, big, "short"}, "")); err != nil {
		t.Fatal(err)
	}
	if n := len(f.received()); n != 2 {
		t.Errorf("%d calls, want 2: two 24 KB texts exceed one call's %d bytes", n, MaxBytes)
	}
}

func TestErrors(t *testing.T) {
	f := newFakeVertex(t, 0)
	e := f.open(t, "text-embedding-005", nil)
	bad := "passage 3 of the corpus"
	f.fail.Store(&bad)
	_, _, err := embed(t, e, body(inputs(5), ""))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(pe.Message, "supports up to 20000") {
		t.Errorf("provider 400: %v", err)
	}
	f.fail.Store(nil)

	_, _, err = embed(t, e, `{"model":"emb","input":[[1,2]]}`)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "input" {
		t.Errorf("token input: %v", err)
	}

	// A token endpoint that refuses: the gateway's credential problem, 502.
	down := newFakeVertex(t, 0)
	de := down.open(t, "text-embedding-005", nil)
	down.tokens.SetUnavailable(true)
	_, _, err = embed(t, de, body([]string{"x"}, ""))
	if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "access token") {
		t.Errorf("token endpoint down: %v", err)
	}
	if len(down.received()) != 0 {
		t.Error("a call went out without a token")
	}
}

func TestOpen(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	creds := ts.ServiceAccountJSON("sa-project")
	p := New(providers.NewHTTPClient())
	open := func(params config.Params) (*endpoint, error) {
		ep, err := p.Open(context.Background(), config.Deployment{ModelName: "emb", Params: params}, embedtest.Env(map[string]string{"VERTEXAI_LOCATION": "global"}))
		if err != nil {
			return nil, err
		}
		return ep.(*endpoint), nil
	}
	// Project from the credential, location from VERTEXAI_LOCATION: global
	// is served by the location-less host.
	e, err := open(config.Params{Model: "vertex_ai/text-embedding-005", VertexCredentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	if e.url != "https://aiplatform.googleapis.com/v1/projects/sa-project/locations/global/publishers/google/models/text-embedding-005:predict" {
		t.Errorf("url %s", e.url)
	}
	e2, err := open(config.Params{Model: "vertex_ai/text-embedding-005", VertexCredentials: creds, VertexProject: "p-2", VertexLocation: "us-east5"})
	if err != nil {
		t.Fatal(err)
	}
	if e2.url != "https://us-east5-aiplatform.googleapis.com/v1/projects/p-2/locations/us-east5/publishers/google/models/text-embedding-005:predict" {
		t.Errorf("url %s", e2.url)
	}
	if e.tokens != e2.tokens {
		t.Error("two deployments on one service account do not share its token cache")
	}
	for _, tc := range []struct {
		params config.Params
		msg    string
	}{
		{config.Params{Model: "vertex_ai/m"}, "no credentials"},
		{config.Params{Model: "vertex_ai/m", VertexCredentials: `{"type":"external_account"}`}, "unusable credentials"},
		{config.Params{Model: "vertex_ai/m", VertexCredentials: creds, VertexLocation: "us-central1.evil.com"}, "not a Vertex AI location"},
		{config.Params{Model: "vertex_ai/m", VertexCredentials: creds, VertexProject: "a/b"}, "not a Google Cloud project"},
		{config.Params{Model: "vertex_ai/m", VertexCredentials: creds, APIBase: "https://x?y=1"}, "query"},
	} {
		_, err := open(tc.params)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, tc.msg) {
			t.Errorf("%+v: %v, want 503 saying %q", tc.params, err, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Error("the credential leaked into an error")
		}
	}
}

// FuzzParsePredictions feeds predict answers (untrusted) to the parser.
func FuzzParsePredictions(f *testing.F) {
	for _, s := range []string{
		`{"predictions":[{"embeddings":{"statistics":{"truncated":false,"token_count":6},"values":[0.1,0.2]}}]}`,
		`{"predictions":[{"embeddings":{"values":[1]}},{"embeddings":{"statistics":{"token_count":2.0},"values":[2]}}]}`,
		`{"predictions":[{}]}`, `{"predictions":null}`, `{"predictions":[{"embeddings":{"statistics":{"token_count":-4},"values":[1]}}]}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := ParsePredictions(body, nil)
		if err != nil {
			return
		}
		if res.Tokens < 0 || !res.TokensKnown && res.Tokens != 0 {
			t.Fatalf("%q: tokens %d known %v", body, res.Tokens, res.TokensKnown)
		}
		for _, v := range res.Vectors {
			if len(v) == 0 {
				t.Fatalf("%q: empty vector accepted", body)
			}
		}
	})
}
