package cohere

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
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
)

const upstreamKey = "co-test-key"

type embedCall struct {
	Path, Auth string
	Body       map[string]any
}

// fakeCohere answers POST /v2/embed as Cohere does, with its error shapes.
type fakeCohere struct {
	*httptest.Server
	mu       sync.Mutex
	calls    []embedCall
	inFlight embedtest.InFlight
	noUsage  atomic.Bool
}

func newFakeCohere(t *testing.T, delay time.Duration) *fakeCohere {
	f := &fakeCohere{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer f.inFlight.Enter()()
		c := embedCall{Path: r.URL.EscapedPath(), Auth: r.Header.Get("Authorization")}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &c.Body); err != nil || r.Method != "POST" {
			t.Errorf("cohere: %s %s", r.Method, raw)
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if c.Auth != "Bearer "+upstreamKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"id":"e1","message":"invalid api token"}`)
			return
		}
		time.Sleep(delay)
		texts, _ := c.Body["texts"].([]any)
		dims := 16 // embed-english-v3.0 answers 1024; small keeps the fake cheap
		if d, ok := c.Body["output_dimension"].(float64); ok {
			dims = int(d)
		}
		b := []byte(`{"id":"5807ee2e-0cda-445a-9ec8-864c60a06606","embeddings":{"float":[`)
		for i, t := range texts {
			if t == "" || t == "reject me" {
				w.WriteHeader(400)
				io.WriteString(w, `{"id":"e2","message":"invalid request: all elements in texts must be non-empty"}`)
				return
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for j, v := range embedtest.Vector(t.(string), dims) {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, `]},"texts":[],"meta":{"api_version":{"version":"2"}`...)
		if !f.noUsage.Load() {
			b = fmt.Appendf(b, `,"billed_units":{"input_tokens":%d}`, 5*len(texts))
		}
		b = append(b, "}}"...)
		w.Write(b)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeCohere) received() []embedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]embedCall(nil), f.calls...)
}

func (f *fakeCohere) open(t *testing.T, model, key string, extra map[string]any) models.Embedder {
	t.Helper()
	d := config.Deployment{ModelName: "emb", Params: config.Params{Model: "cohere/" + model, APIBase: f.URL, APIKey: key, Extra: extra}}
	return embedtest.Open(t, New(providers.NewHTTPClient()), d)
}

func inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("document %d", i)
	}
	return out
}

func body(texts []string, extra string) string {
	in, _ := json.Marshal(texts)
	return fmt.Sprintf(`{"model":"emb","input":%s%s}`, in, extra)
}

func TestEmbed(t *testing.T) {
	f := newFakeCohere(t, 20*time.Millisecond)
	e := f.open(t, "embed-v4.0", upstreamKey, map[string]any{"truncate": "START"})
	texts := inputs(200)
	a, ans, err := embedtest.Embed(t, e, body(texts, `,"dimensions":256,"encoding_format":"base64","input_type":"RETRIEVAL_DOCUMENT"`))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Data) != 200 || a.Model != "embed-v4.0" || ans.UsageEstimated || a.Usage.PromptTokens != 1000 {
		t.Fatalf("%d embeddings, model %s, usage %+v (estimated %v)", len(a.Data), a.Model, a.Usage, ans.UsageEstimated)
	}
	for i, d := range a.Data {
		if d.Index != i || !reflect.DeepEqual(embedtest.Base64(t, d.Embedding), embedtest.Vector(texts[i], 256)) {
			t.Fatalf("embedding %d is not input %d's", d.Index, i)
		}
	}
	sizes := map[int]int{}
	for _, c := range f.received() {
		if c.Path != "/v2/embed" || c.Auth != "Bearer "+upstreamKey || c.Body["model"] != "embed-v4.0" || c.Body["input_type"] != "search_document" ||
			c.Body["output_dimension"] != float64(256) || c.Body["truncate"] != "START" || !reflect.DeepEqual(c.Body["embedding_types"], []any{"float"}) {
			t.Errorf("call %s %q %v", c.Path, c.Auth, c.Body)
		}
		sizes[len(c.Body["texts"].([]any))]++
	}
	if !reflect.DeepEqual(sizes, map[int]int{96: 2, 8: 1}) {
		t.Errorf("batches %v, want 96, 96, 8", sizes)
	}
	if f.inFlight.Peak() != 3 {
		t.Errorf("peak %d in flight, want the 3 batches together", f.inFlight.Peak())
	}
}

func TestDefaultsAndRefusals(t *testing.T) {
	f := newFakeCohere(t, 0)
	e := f.open(t, "embed-english-v3.0", upstreamKey, nil)
	f.noUsage.Store(true)
	a, ans, err := embedtest.Embed(t, e, body([]string{"a b c d e f"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.received()[0]; c.Body["input_type"] != DefaultInputType || c.Body["output_dimension"] != nil || c.Body["truncate"] != nil {
		t.Errorf("defaults: %v", c.Body)
	}
	if !ans.UsageEstimated || a.Usage.PromptTokens != embedbatch.EstimateTokens("a b c d e f") {
		t.Errorf("no billed_units: usage %+v estimated %v", a.Usage, ans.UsageEstimated)
	}
	for _, tc := range []struct{ body, param string }{
		{body([]string{"x"}, `,"dimensions":512`), "dimensions"},
		{body([]string{"x"}, `,"input_type":["search_query"]`), "input_type"},
		{`{"model":"emb","input":[[1]]}`, "input"},
	} {
		_, _, err := embedtest.Embed(t, e, tc.body)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tc.param {
			t.Errorf("%s: %v, want a 400 naming %s", tc.body, err, tc.param)
		}
	}
}

func TestErrors(t *testing.T) {
	f := newFakeCohere(t, 0)
	_, _, err := embedtest.Embed(t, f.open(t, "embed-v4.0", "wrong", nil), body([]string{"x"}, ""))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Message != "invalid api token" {
		t.Errorf("bad key: %v", err)
	}
	_, _, err = embedtest.Embed(t, f.open(t, "embed-v4.0", upstreamKey, nil), body([]string{"ok", "reject me"}, ""))
	if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(pe.Message, "non-empty") {
		t.Errorf("request error: %v", err)
	}
	var ae *api.Error
	if _, err := New(nil).Open(context.Background(), config.Deployment{ModelName: "emb", Params: config.Params{Model: "cohere/embed-v4.0"}}, embedtest.NoSecrets); !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("no key: %v", err)
	}
	ep, err := New(nil).Open(context.Background(),
		config.Deployment{ModelName: "emb", Params: config.Params{Model: "cohere/embed-v4.0"}}, embedtest.Env(map[string]string{"CO_API_KEY": "k"}))
	if err != nil || ep.APIBase() != DefaultAPIBase {
		t.Errorf("CO_API_KEY and the default base: %v %v", ep, err)
	}
}

// FuzzParseEmbed feeds /v2/embed answers (untrusted) to the parser.
func FuzzParseEmbed(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","embeddings":{"float":[[0.1,0.2]]},"texts":["a"],"meta":{"billed_units":{"input_tokens":2}}}`,
		`{"embeddings":{"int8":[[1]]}}`, `{"embeddings":{"float":[]},"meta":{"billed_units":{"input_tokens":-1}}}`,
		`{"embeddings":[[1]]}`, `{"meta":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := ParseEmbed(body, nil)
		if err != nil {
			return
		}
		if res.Tokens < 0 || !res.TokensKnown && res.Tokens != 0 {
			t.Fatalf("%q: tokens %d known %v", body, res.Tokens, res.TokensKnown)
		}
		for _, v := range res.Vectors {
			embedbatch.AppendVector(nil, v, oai.EncodingBase64)
		}
	})
}
