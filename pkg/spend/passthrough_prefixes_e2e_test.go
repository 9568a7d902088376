package spend_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// googleAndBedrockUpstream answers Gemini's generateContent (streamed as
// SSE or not) and Bedrock's InvokeModel (an Anthropic model) and Converse,
// each with 100 input and 50 output tokens in the vendor's usage fields.
func googleAndBedrockUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gemini := `{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":50,"totalTokenCount":150},"modelVersion":"gemini-2.0-flash"}`
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, "/models/gemini-2.0-flash:generateContent"), // Gemini's and Vertex AI's
			p == "/v1/projects/sa-project/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, gemini)
		case strings.HasSuffix(p, "/models/gemini-2.0-flash:streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"candidates":[{"content":{"parts":[{"text":"h"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":100,"totalTokenCount":100},"modelVersion":"gemini-2.0-flash"}`+"\r\n\r\n")
			fmt.Fprint(w, "data: "+gemini+"\r\n\r\n")
		case p == "/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":50}}`)
		case p == "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":100,"outputTokens":50,"totalTokens":150},"metrics":{"latencyMs":1}}`)
		default:
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"message":"no such path %s"}`, p)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// Passthrough calls on the Gemini, Vertex AI and Bedrock prefixes are priced from the
// usage the vendor's answer or stream carries, at the price of the model
// their path names, and counted once each (the Anthropic prefix:
// TestPassthroughCallsArePricedStreamedOrNotAndCutStreamsAtWhatCame).
func TestPassthroughOnGeminiVertexAndBedrockIsPriced(t *testing.T) {
	up := googleAndBedrockUpstream(t)
	tokens := googletest.NewTokenServer(t)
	opts := gatewaytest.Options{
		Env: map[string]string{"SA": tokens.ServiceAccountJSON("sa-project")},
		Config: "passthrough:\n" +
			"  gemini: {api_base: " + up.URL + ", api_key: gemini-provider-key}\n" +
			"  vertex_ai: {api_base: " + up.URL + ", vertex_credentials: os.environ/SA}\n" +
			"  bedrock: {api_base: " + up.URL + ", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n",
		Jobs: []string{"callback-delivery"},
	}
	const gemini = 100*1e-7 + 50*4e-7 // gemini-2.0-flash in the shipped table
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
		want := 0.0
		for _, c := range []struct {
			path, body string
			cost       float64
		}{
			{"/gemini/v1beta/models/gemini-2.0-flash:generateContent", body, gemini},
			{"/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", body, gemini},
			{"/vertex_ai/v1/publishers/google/models/gemini-2.0-flash:generateContent", body, gemini},
			{"/bedrock/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke",
				`{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, haiku},
			{"/bedrock/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, haiku},
		} {
			r := g.Do("POST", c.path, key, c.body)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", c.path, r.Status, r.Body)
			}
			want += c.cost
		}
		rep := waitReport(t, g, key, "api_key", 5)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, want) {
			t.Errorf("two Gemini, a Vertex AI and two Bedrock calls cost %v, want %v", got, want)
		}
		models := map[string]float64{}
		for _, row := range waitReport(t, g, key, "model", 5)["data"].([]any) {
			row := row.(map[string]any)
			models[row["group"].(string)] += row["spend"].(float64)
		}
		if len(models) != 2 {
			t.Errorf("model rows %v, want gemini-2.0-flash and the Bedrock model's", models)
		}
	})
}
