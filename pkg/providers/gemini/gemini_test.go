package gemini

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

const upstreamKey = "AIza-test-key"

type batchCall struct {
	Path, Key, Query string
	Body             struct {
		Requests []struct {
			Model   string `json:"model"`
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			TaskType             string `json:"taskType"`
			OutputDimensionality int    `json:"outputDimensionality"`
		} `json:"requests"`
	}
}

// fakeGemini answers batchEmbedContents as the Gemini API does, with its
// error shapes, checking the key.
type fakeGemini struct {
	*httptest.Server
	mu       sync.Mutex
	calls    []batchCall
	inFlight embedtest.InFlight
}

func newFakeGemini(t *testing.T, delay time.Duration) *fakeGemini {
	f := &fakeGemini{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer f.inFlight.Enter()()
		c := batchCall{Path: r.URL.EscapedPath(), Key: r.Header.Get("X-Goog-Api-Key"), Query: r.URL.RawQuery}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &c.Body); err != nil || r.Method != "POST" {
			t.Errorf("gemini: %s %s", r.Method, raw)
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		if c.Key != upstreamKey {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`)
			return
		}
		time.Sleep(delay)
		b := []byte("{\n  \"embeddings\": [\n")
		for i, req := range c.Body.Requests {
			text := req.Content.Parts[0].Text
			if text == "too long" {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"code":400,"message":"* BatchEmbedContentsRequest.requests[0].content: input too long","status":"INVALID_ARGUMENT"}}`)
				return
			}
			if i > 0 {
				b = append(b, ",\n"...)
			}
			dims := 3072
			if req.OutputDimensionality > 0 {
				dims = req.OutputDimensionality
			}
			b = append(b, `    {"values": [`...)
			for j, v := range embedtest.Vector(text, dims) {
				if j > 0 {
					b = append(b, ", "...)
				}
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			}
			b = append(b, "]}"...)
		}
		b = append(b, "\n  ]\n}\n"...)
		w.Write(b)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGemini) received() []batchCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]batchCall(nil), f.calls...)
}

func (f *fakeGemini) open(t *testing.T, key string, extra map[string]any) models.Embedder {
	t.Helper()
	d := config.Deployment{ModelName: "emb", Params: config.Params{Model: "gemini/gemini-embedding-001", APIBase: f.URL, APIKey: key, Extra: extra}}
	return embedtest.Open(t, New(providers.NewHTTPClient()), d)
}

func embed(t *testing.T, e models.Embedder, body string) (map[string]any, *models.Answer, error) {
	t.Helper()
	req, err := oai.ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := e.Embed(context.Background(), req)
	if err != nil {
		return nil, nil, err
	}
	defer ans.Body.Close()
	var a map[string]any
	if err := json.NewDecoder(ans.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a, ans, nil
}

func inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("question %d about the product", i)
	}
	return out
}

func body(texts []string, extra string) string {
	in, _ := json.Marshal(texts)
	return fmt.Sprintf(`{"model":"emb","input":%s%s}`, in, extra)
}

func TestBatchEmbedContents(t *testing.T) {
	f := newFakeGemini(t, 20*time.Millisecond)
	e := f.open(t, upstreamKey, map[string]any{"input_type": "search_document"})
	texts := inputs(250)
	a, ans, err := embed(t, e, body(texts, `,"dimensions":32,"task_type":"retrieval_query"`))
	if err != nil {
		t.Fatal(err)
	}
	data := a["data"].([]any)
	if len(data) != 250 || a["model"] != "gemini-embedding-001" {
		t.Fatalf("%d embeddings, model %v", len(data), a["model"])
	}
	for i, d := range data {
		d := d.(map[string]any)
		var got []float32
		b, _ := json.Marshal(d["embedding"])
		json.Unmarshal(b, &got)
		if d["index"] != float64(i) || !reflect.DeepEqual(got, embedtest.Vector(texts[i], 32)) {
			t.Fatalf("embedding %v is not input %d's", d["index"], i)
		}
	}
	// No usage from Gemini: estimated, and said so.
	var want int64
	for _, s := range texts {
		want += embedbatch.EstimateTokens(s)
	}
	usage := a["usage"].(map[string]any)
	if !ans.UsageEstimated || usage["prompt_tokens"] != float64(want) || usage["total_tokens"] != float64(want) {
		t.Errorf("usage %v estimated %v, want %d estimated", usage, ans.UsageEstimated, want)
	}
	calls := f.received()
	var sizes []int
	for _, c := range calls {
		if c.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || c.Key != upstreamKey || c.Query != "" {
			t.Errorf("call %s key %q query %q: the key belongs in x-goog-api-key only", c.Path, c.Key, c.Query)
		}
		for _, r := range c.Body.Requests {
			if r.Model != "models/gemini-embedding-001" || r.TaskType != "RETRIEVAL_QUERY" || r.OutputDimensionality != 32 || len(r.Content.Parts) != 1 {
				t.Errorf("request %+v", r)
			}
		}
		sizes = append(sizes, len(c.Body.Requests))
	}
	if len(sizes) != 3 || sizes[0]+sizes[1]+sizes[2] != 250 || max(sizes[0], sizes[1], sizes[2]) != MaxBatch {
		t.Errorf("batches %v, want 100, 100, 50", sizes)
	}
	if f.inFlight.Peak() != 3 {
		t.Errorf("peak %d in flight, want the 3 batches together", f.inFlight.Peak())
	}
}

func TestErrors(t *testing.T) {
	f := newFakeGemini(t, 0)
	_, _, err := embed(t, f.open(t, "wrong-key", nil), body([]string{"x"}, ""))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || !strings.Contains(pe.Message, "API key not valid") {
		t.Errorf("bad key: %v; want it treated as a refused credential (401)", err)
	}
	e := f.open(t, upstreamKey, nil)
	_, _, err = embed(t, e, body([]string{"fine", "too long"}, ""))
	if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(pe.Message, "input too long") {
		t.Errorf("request error: %v", err)
	}
	_, _, err = embed(t, e, `{"model":"emb","input":[7,8]}`)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Param != "input" {
		t.Errorf("token input: %v", err)
	}
	if _, err := New(nil).Open(context.Background(), config.Deployment{ModelName: "emb", Params: config.Params{Model: "gemini/m"}}, embedtest.NoSecrets); !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, "GEMINI_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	ep, err := New(nil).Open(context.Background(),
		config.Deployment{ModelName: "emb", Params: config.Params{Model: "gemini/models/text-embedding-004"}}, embedtest.Env(map[string]string{"GEMINI_API_KEY": "k"}))
	if err != nil || ep.APIBase() != DefaultAPIBase || ep.(*endpoint).url != DefaultAPIBase+"/v1beta/models/text-embedding-004:batchEmbedContents" {
		t.Errorf("defaults: %v %v", ep, err)
	}
}

// FuzzParseBatch feeds batchEmbedContents answers (untrusted) to the parser.
func FuzzParseBatch(f *testing.F) {
	for _, s := range []string{`{"embeddings":[{"values":[0.1,0.2]},{"values":[3]}]}`, `{"embeddings":[{}]}`, `{"embeddings":null}`, `{"embeddings":[{"values":"x"}]}`, `7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vecs, err := ParseBatch(body)
		if err != nil {
			return
		}
		for _, v := range vecs {
			if len(v) == 0 {
				t.Fatalf("%q: empty vector accepted", body)
			}
			embedbatch.AppendVector(nil, v, oai.EncodingBase64)
		}
	})
}

// An embed request's content is a chat turn's Content type; on the wire it
// is the bare {"parts":[{"text"}]} batchEmbedContents takes.
func TestEmbedRequestWire(t *testing.T) {
	got, err := json.Marshal(embedRequest{Model: "models/m", Content: turn{Parts: []chatPart{{Text: "hi"}}}, TaskType: "RETRIEVAL_QUERY"})
	want := `{"model":"models/m","content":{"parts":[{"text":"hi"}]},"taskType":"RETRIEVAL_QUERY"}`
	if err != nil || string(got) != want {
		t.Errorf("embed request = %s, %v; want %s", got, err, want)
	}
}
