package embeddings_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// mockConfig has mock deployments only: no provider and no credential
// anywhere, as on a fresh machine.
const mockConfig = `model_list:
  - model_name: mock-embed
    litellm_params: {model: openai/text-embedding-3-small, mock_response: [0.6, 0.8, 0, 0]}
  - model_name: mock-gpt
    litellm_params: {model: openai/gpt-4o-mini, mock_response: "Hello!"}
  - model_name: keyless
    litellm_params: {model: openai/text-embedding-3-small}
`

func TestMockEmbeddingsEndToEnd(t *testing.T) {
	chattest.Run(t, chattest.Options{Config: mockConfig}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		texts := openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "goodbye, world"}}
		tokens := oai.EstimateTokens("hello") + oai.EstimateTokens("goodbye, world")
		t.Run("the deployment's vector", func(t *testing.T) {
			resp, err := h.Client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "mock-embed", Input: texts})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Data) != 2 || resp.Model != "text-embedding-3-small" || resp.Usage.PromptTokens != tokens || resp.Usage.TotalTokens != tokens {
				t.Fatalf("answer %s", resp.RawJSON())
			}
			for i, e := range resp.Data {
				if e.Index != int64(i) || !equalVector(e.Embedding, []float64{0.6, 0.8, 0, 0}) {
					t.Errorf("data[%d] = %+v", i, e)
				}
			}
			ev := h.Event(t)
			if ev.CallType != "aembedding" || ev.ModelGroup != "mock-embed" || ev.Status != "success" || !ev.UsageEstimated ||
				ev.PromptTokens != tokens || !strings.Contains(string(ev.Response), `"data_count":2`) {
				t.Errorf("event %+v", ev)
			}
		})
		t.Run("base64 and dimensions", func(t *testing.T) {
			resp, err := h.Client.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model: "mock-embed", Input: texts, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64, Dimensions: openai.Int(2),
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resp.RawJSON(), `"embedding":"`) {
				t.Errorf("not base64 on the wire: %s", resp.RawJSON())
			}
			for i, e := range resp.Data {
				if !equalVector(e.Embedding, []float64{0.6, 0.8}) {
					t.Errorf("data[%d] = %v", i, e.Embedding)
				}
			}
			h.Event(t)
		})
		t.Run("vectors derived from a text mock", func(t *testing.T) {
			resp, err := h.Client.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model: "mock-gpt", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "world", "hello"}}, Dimensions: openai.Int(64),
			})
			if err != nil {
				t.Fatal(err)
			}
			v := resp.Data
			if len(v) != 3 || len(v[0].Embedding) != 64 || equalVector(v[0].Embedding, v[1].Embedding) || !equalVector(v[0].Embedding, v[2].Embedding) {
				t.Fatalf("answer %s", resp.RawJSON())
			}
			var sum float64
			for _, f := range v[1].Embedding {
				sum += f * f
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("a derived vector's squared length is %v", sum)
			}
			h.Event(t)
		})
		t.Run("the request's own mock_response", func(t *testing.T) {
			// keyless has no credential: only the mock can answer.
			resp, err := h.Client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "keyless", Input: texts},
				option.WithJSONSet("mock_response", []float64{1, 0.5}))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Data) != 2 || !equalVector(resp.Data[1].Embedding, []float64{1, 0.5}) {
				t.Fatalf("answer %s", resp.RawJSON())
			}
			h.Event(t)
		})
		t.Run("errors", func(t *testing.T) {
			for _, tc := range []struct {
				path, body, param, msg string
			}{
				{"/v1/embeddings", `{"model":"mock-embed","input":"x","dimensions":5}`, "dimensions", "at most 4"},
				{"/v1/embeddings", `{"model":"mock-gpt","input":"x","dimensions":5000}`, "dimensions", "at most 4096"},
				{"/v1/embeddings", `{"model":"keyless","input":"x","mock_response":["a"]}`, "mock_response", "'mock_response[0]'"},
				{"/v1/chat/completions", `{"model":"mock-embed","messages":[{"role":"user","content":"hi"}]}`, "model", "does not support chat completions"},
			} {
				r := h.Post(t, tc.path, tc.body)
				var e struct {
					Error struct{ Message, Type, Param, Code string }
				}
				if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || e.Error.Param != tc.param ||
					e.Error.Code != "invalid_value" || !strings.Contains(e.Error.Message, tc.msg) {
					t.Errorf("%s: %d %s", tc.body, r.Status, r.Body)
				}
				h.Event(t)
			}
		})
	})
}

// equalVector compares vectors as float32, the precision they travel in.
func equalVector(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if float32(a[i]) != float32(b[i]) {
			return false
		}
	}
	return true
}
