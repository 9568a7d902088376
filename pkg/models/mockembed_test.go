package models

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

const mockEmbedConfig = `
model_list:
  - model_name: mock-embed
    litellm_params:
      model: openai/text-embedding-3-small
      mock_response: [0.6, 0.8, 0, 0]
  - model_name: mock-gpt
    litellm_params:
      model: openai/gpt-4o-mini
      mock_response: "Hello!"
  - model_name: real
    litellm_params:
      model: fake/real
`

// mockEmbedding is a decoded embeddings answer.
type mockEmbedding struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string    `json:"model"`
	Usage oai.Usage `json:"usage"`
}

// vectors returns the answer's vectors, decoding base64 ones.
func (e mockEmbedding) vectors(t *testing.T) [][]float32 {
	t.Helper()
	var out [][]float32
	for i, d := range e.Data {
		if d.Index != i || d.Object != "embedding" {
			t.Fatalf("data[%d] is %+v", i, d)
		}
		var v []float32
		if d.Embedding[0] == '"' {
			var s string
			json.Unmarshal(d.Embedding, &s)
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("data[%d]: bad base64 %q (%v)", i, s, err)
			}
			for j := 0; j < len(raw); j += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
		} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatalf("data[%d]: %v", i, err)
		}
		out = append(out, v)
	}
	return out
}

func mockEmbed(t *testing.T, h *harness, body string) (mockEmbedding, *Answer) {
	t.Helper()
	req, err := oai.ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.router.Embed(context.Background(), admin, req)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	b, err := io.ReadAll(rep.Answer.Body)
	rep.Answer.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var e mockEmbedding
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	if e.Object != "list" {
		t.Fatalf("answer %s is not a list", b)
	}
	return e, rep.Answer
}

func norm(v []float32) float64 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	return math.Sqrt(s)
}

func TestMockEmbedVectorForEveryInput(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, ans := mockEmbed(t, h, `{"model":"mock-embed","input":["hello","a longer text, eight tokens or so","x"]}`)
	want := [][]float32{{0.6, 0.8, 0, 0}, {0.6, 0.8, 0, 0}, {0.6, 0.8, 0, 0}}
	if diff := cmp.Diff(want, e.vectors(t)); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	tokens := oai.EstimateTokens("hello") + oai.EstimateTokens("a longer text, eight tokens or so") + oai.EstimateTokens("x")
	if diff := cmp.Diff(oai.Usage{PromptTokens: tokens, TotalTokens: tokens}, e.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if e.Model != "text-embedding-3-small" || !ans.UsageEstimated || ans.Encoding != oai.EncodingFloat {
		t.Errorf("model %q, answer %+v", e.Model, ans)
	}
	if n := h.fake.callsTo("real"); n != 0 {
		t.Errorf("the provider was called %d times", n)
	}
}

func TestMockEmbedBase64(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, ans := mockEmbed(t, h, `{"model":"mock-embed","input":"hello","encoding_format":"base64"}`)
	if got := string(e.Data[0].Embedding); got[0] != '"' {
		t.Fatalf("embedding %s is not base64", got)
	}
	if diff := cmp.Diff([][]float32{{0.6, 0.8, 0, 0}}, e.vectors(t)); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	if ans.Encoding != oai.EncodingBase64 {
		t.Errorf("Encoding = %q", ans.Encoding)
	}
}

func TestMockEmbedDimensionsShortensTheVector(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, _ := mockEmbed(t, h, `{"model":"mock-embed","input":"hello","dimensions":1}`)
	if diff := cmp.Diff([][]float32{{1}}, e.vectors(t)); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	// The deployment's own vector is untouched for the next call.
	e, _ = mockEmbed(t, h, `{"model":"mock-embed","input":"hello"}`)
	if diff := cmp.Diff([][]float32{{0.6, 0.8, 0, 0}}, e.vectors(t)); diff != "" {
		t.Errorf("vectors after (-want +got):\n%s", diff)
	}
}

func TestMockEmbedDerivedVectors(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, _ := mockEmbed(t, h, `{"model":"mock-gpt","input":["hello","world","hello"]}`)
	v := e.vectors(t)
	if len(v) != 3 || len(v[0]) != mockDimensions {
		t.Fatalf("%d vectors of %d", len(v), len(v[0]))
	}
	for i, vec := range v {
		if n := norm(vec); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d has length %v", i, n)
		}
	}
	if cmp.Equal(v[0], v[1]) {
		t.Error("different texts got the same vector")
	}
	if diff := cmp.Diff(v[0], v[2]); diff != "" {
		t.Errorf("the same text got different vectors:\n%s", diff)
	}
	// Stable across calls, encodings and inputs around it.
	again, _ := mockEmbed(t, h, `{"model":"mock-gpt","input":"world","encoding_format":"base64"}`)
	if diff := cmp.Diff(v[1], again.vectors(t)[0]); diff != "" {
		t.Errorf("the same text got a different vector in another call:\n%s", diff)
	}
}

// TestMockEmbedDerivedVectorIsStable pins a derived vector: the same input
// must get the same vector in every version of sluice and Go, or stored
// test embeddings would stop matching. (The figures are from an
// independent implementation of FNV-1a and splitmix64.)
func TestMockEmbedDerivedVectorIsStable(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, _ := mockEmbed(t, h, `{"model":"mock-gpt","input":"hello","dimensions":4}`)
	want := [][]float32{{0.7465276, 0.1959498, -0.5421744, -0.3321854}}
	if diff := cmp.Diff(want, e.vectors(t), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("vector (-want +got):\n%s", diff)
	}
}

func TestMockEmbedTokenInputs(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	e, _ := mockEmbed(t, h, `{"model":"mock-gpt","input":[[1,2,3],[4,5],[1, 2, 3]],"dimensions":8}`)
	v := e.vectors(t)
	if cmp.Equal(v[0], v[1]) || !cmp.Equal(v[0], v[2]) {
		t.Errorf("token inputs: vectors %v", v)
	}
	if e.Usage.PromptTokens != 8 || e.Usage.TotalTokens != 8 {
		t.Errorf("usage %+v, want the 8 token ids", e.Usage)
	}
	one, _ := mockEmbed(t, h, `{"model":"mock-gpt","input":[1,2,3],"dimensions":8}`)
	if diff := cmp.Diff(v[:1], one.vectors(t)); diff != "" {
		t.Errorf("one token input (-want +got):\n%s", diff)
	}
}

func TestMockEmbedRequestMockResponse(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	// The request's own vector wins over the deployment's, and a real
	// deployment is not called.
	for _, model := range []string{"mock-embed", "mock-gpt", "real"} {
		e, _ := mockEmbed(t, h, `{"model":"`+model+`","input":["a","b"],"mock_response":[1,2]}`)
		if diff := cmp.Diff([][]float32{{1, 2}, {1, 2}}, e.vectors(t)); diff != "" {
			t.Errorf("%s: vectors (-want +got):\n%s", model, diff)
		}
	}
	// A text asks for derived vectors, even of a vector deployment.
	e, _ := mockEmbed(t, h, `{"model":"mock-embed","input":"a","mock_response":"any"}`)
	if got := e.vectors(t); len(got[0]) != mockDimensions {
		t.Errorf("derived vector of %d dimensions", len(got[0]))
	}
	if n := h.fake.callsTo("real"); n != 0 {
		t.Errorf("the provider was called %d times", n)
	}
}

func TestMockEmbedDimensionsErrors(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	for _, body := range []string{
		`{"model":"mock-embed","input":"a","dimensions":5}`,
		`{"model":"mock-gpt","input":"a","dimensions":4097}`,
		`{"model":"real","input":"a","mock_response":[1],"dimensions":2}`,
	} {
		req, err := oai.ParseEmbeddingRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.router.Embed(context.Background(), admin, req)
		if e := wantAPIError(t, err, http.StatusBadRequest, "invalid_value"); e.Param != "dimensions" {
			t.Errorf("%s: param %q", body, e.Param)
		}
	}
}

func TestVectorMockServesNoChat(t *testing.T) {
	h := newHarness(t, mockEmbedConfig, ok)
	req, err := oai.ParseChatRequest([]byte(`{"model":"mock-embed","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.router.Chat(context.Background(), admin, req)
	if e := wantAPIError(t, err, http.StatusBadRequest, "invalid_value"); e.Param != "model" {
		t.Errorf("param %q", e.Param)
	}
	// The request's own text still answers.
	req, err = oai.ParseChatRequest([]byte(`{"model":"mock-embed","messages":[{"role":"user","content":"hi"}],"mock_response":"yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.router.Chat(context.Background(), admin, req)
	if err != nil {
		t.Fatal(err)
	}
	rep.Answer.Body.Close()
}
