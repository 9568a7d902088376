package functions_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// Provider credentials the test config gives sluice; the fake providers
// accept only these, so a sample answers 200 only when sluice injected them.
const (
	openAIKey = "sk-openai-sample-0123456789"
	// The gateway-wide Langfuse callback's keys (litellm_settings).
	langfusePublic = "pk-lf-gateway-sample"
	langfuseSecret = "sk-lf-gateway-sample-secret"
	anthropicKey   = "sk-ant-sample-0123456789"
	geminiKey      = "AIzaSyA-sample-gemini-key-0123"
	bedrockKeyID   = "AKIASLUICESAMPLE0001"
	bedrockSecret  = "sluice-sample-bedrock-secret-key/0123456789"
	vertexProject  = "sluice-sample"
)

// world is the providers behind the sample events: one local server speaking
// OpenAI (embeddings, moderations), Anthropic, Gemini, Vertex AI and Bedrock,
// plus Google's token endpoint. Each checks that the provider credential was
// injected and that no sluice key leaked, and answers in the provider's wire
// format.
type world struct {
	srv    *httptest.Server
	tokens *googletest.TokenServer

	mu sync.Mutex
	// hold, when set, makes the next stream (Anthropic's, or a chat
	// completion's) wait on it after its first event (the streaming test
	// releases it once it saw that event).
	hold chan struct{}
	// logged counts the log events the gateway-wide Langfuse callback
	// received, by id.
	logged map[string]int
}

func newWorld(t *testing.T) *world {
	w := &world{tokens: googletest.NewTokenServer(t), logged: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

// holdNextStream arms the hold and returns the function that releases it.
func (w *world) holdNextStream() (release func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	w.hold = ch
	w.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (w *world) takeHold() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hold
	w.hold = nil
	return h
}

// config writes the sluice config pointing every model and prefix at the world.
func (w *world) config(t *testing.T) string {
	u := w.srv.URL
	doc := fmt.Sprintf(`model_list:
  - model_name: text-embedding-3-small
    litellm_params: {model: openai/text-embedding-3-small, api_key: os.environ/OPENAI_API_KEY, api_base: %[1]s/v1}
  - model_name: omni-moderation-latest
    litellm_params: {model: openai/omni-moderation-latest, api_key: os.environ/OPENAI_API_KEY, api_base: %[1]s/v1}
  - model_name: gpt-4o-mini
    litellm_params: {model: openai/gpt-4o-mini, api_key: os.environ/OPENAI_API_KEY, api_base: %[1]s/v1}
  - model_name: gpt-3.5-turbo-instruct
    litellm_params: {model: openai/gpt-3.5-turbo-instruct, api_key: os.environ/OPENAI_API_KEY, api_base: %[1]s/v1}
litellm_settings:
  callbacks: [langfuse]
environment_variables:
  LANGFUSE_PUBLIC_KEY: %[2]s
  LANGFUSE_SECRET_KEY: %[3]s
  LANGFUSE_HOST: %[1]s
passthrough:
  anthropic: {api_base: %[1]s, api_key: os.environ/ANTHROPIC_API_KEY}
  gemini: {api_base: %[1]s, api_key: os.environ/GEMINI_API_KEY}
  vertex_ai: {api_base: %[1]s, vertex_credentials: os.environ/SAMPLE_VERTEX_CREDENTIALS, vertex_location: us-central1}
  bedrock: {api_base: %[1]s, aws_region_name: us-east-1, aws_access_key_id: os.environ/SAMPLE_BEDROCK_KEY_ID, aws_secret_access_key: os.environ/SAMPLE_BEDROCK_SECRET}
`, u, langfusePublic, langfuseSecret)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// env is what the config's os.environ/ references resolve against.
func (w *world) env() map[string]string {
	return map[string]string{
		"OPENAI_API_KEY":            openAIKey,
		"ANTHROPIC_API_KEY":         anthropicKey,
		"GEMINI_API_KEY":            geminiKey,
		"SAMPLE_VERTEX_CREDENTIALS": w.tokens.ServiceAccountJSON(vertexProject),
		"SAMPLE_BEDROCK_KEY_ID":     bedrockKeyID,
		"SAMPLE_BEDROCK_SECRET":     bedrockSecret,
	}
}

func refuse(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": "fake provider: " + fmt.Sprintf(format, args...)}})
}

func (w *world) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// No sluice key may reach a provider, in any header or the query.
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, "sk-sluice-sample") || strings.Contains(v, "sk-Hk3vQ9") {
				refuse(rw, "sluice key leaked in %s", k)
				return
			}
		}
	}
	if strings.Contains(r.URL.RawQuery, "sk-sluice-sample") {
		refuse(rw, "sluice key leaked in the query")
		return
	}
	var in map[string]any
	if len(body) > 0 && json.Unmarshal(body, &in) != nil {
		refuse(rw, "body is not JSON: %q", body)
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == "POST" && path == "/v1/embeddings":
		if r.Header.Get("Authorization") != "Bearer "+openAIKey || in["model"] != "text-embedding-3-small" {
			refuse(rw, "embeddings: auth %q model %v", r.Header.Get("Authorization"), in["model"])
			return
		}
		writeJSON(rw, map[string]any{"object": "list", "model": "text-embedding-3-small",
			"data": []any{
				map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.0123, -0.0456, 0.0789}},
				map[string]any{"object": "embedding", "index": 1, "embedding": []float64{-0.0321, 0.0654, -0.0987}},
			},
			"usage": map[string]int{"prompt_tokens": 9, "total_tokens": 9}})
	case r.Method == "POST" && path == "/v1/moderations":
		if r.Header.Get("Authorization") != "Bearer "+openAIKey {
			refuse(rw, "moderations: auth %q", r.Header.Get("Authorization"))
			return
		}
		writeJSON(rw, map[string]any{"id": "modr-0c5b2d3e", "model": "omni-moderation-latest",
			"results": []any{map[string]any{"flagged": false, "categories": map[string]bool{"violence": false, "harassment": false},
				"category_scores": map[string]float64{"violence": 0.0004, "harassment": 0.0001}}}})
	case r.Method == "POST" && (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/responses"):
		if r.Header.Get("Authorization") != "Bearer "+openAIKey {
			refuse(rw, "%s: auth %q", path, r.Header.Get("Authorization"))
			return
		}
		w.openAIText(rw, path, in)
	case r.Method == "POST" && path == "/v1/messages":
		if r.Header.Get("X-Api-Key") != anthropicKey || r.Header.Get("Anthropic-Version") == "" {
			refuse(rw, "anthropic: x-api-key %q version %q", r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version"))
			return
		}
		w.anthropicStream(rw)
	case r.Method == "POST" && path == "/v1beta/models/gemini-2.0-flash:streamGenerateContent":
		if r.Header.Get("X-Goog-Api-Key") != geminiKey || r.URL.Query().Get("alt") != "sse" || r.URL.Query().Has("key") {
			refuse(rw, "gemini: key %q query %q", r.Header.Get("X-Goog-Api-Key"), r.URL.RawQuery)
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		for _, text := range []string{"Danube, ", "Rhine, Seine."} {
			fmt.Fprintf(rw, "data: %s\r\n\r\n", mustJSON(map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]string{"text": text}}}}},
				"usageMetadata": map[string]int{"promptTokenCount": 7, "candidatesTokenCount": 6, "totalTokenCount": 13}, "modelVersion": "gemini-2.0-flash"}))
			rw.(http.Flusher).Flush()
		}
	case r.Method == "POST" && path == "/v1/projects/"+vertexProject+"/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent":
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !w.tokens.Valid(token) {
			refuse(rw, "vertex: Authorization %q is not a token of the sample service account", r.Header.Get("Authorization"))
			return
		}
		writeJSON(rw, map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model",
			"parts": []any{map[string]string{"text": "Water evaporates, condenses into clouds and falls as rain."}}}, "finishReason": "STOP"}},
			"usageMetadata": map[string]int{"promptTokenCount": 9, "candidatesTokenCount": 12, "totalTokenCount": 21}})
	case r.Method == "POST" && path == "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse":
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+bedrockKeyID+"/") {
			refuse(rw, "bedrock: Authorization %q is not sluice's SigV4 signature", r.Header.Get("Authorization"))
			return
		}
		writeJSON(rw, map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant",
			"content": []any{map[string]string{"text": "Lisbon."}}}}, "stopReason": "end_turn",
			"usage": map[string]int{"inputTokens": 14, "outputTokens": 3, "totalTokens": 17}, "metrics": map[string]int{"latencyMs": 312}})
	case r.Method == "POST" && path == "/api/public/ingestion":
		w.langfuseIngest(rw, r, body)
	default:
		refuse(rw, "no such endpoint: %s %s", r.Method, r.URL.EscapedPath())
	}
}

// langfuseIngest is Langfuse's ingestion endpoint: it counts the
// generations logged, by id, and accepts every event.
func (w *world) langfuseIngest(rw http.ResponseWriter, r *http.Request, body []byte) {
	if u, p, _ := r.BasicAuth(); u != langfusePublic || p != langfuseSecret {
		refuse(rw, "langfuse: basic auth %q", u)
		return
	}
	var req struct {
		Batch []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Body struct {
				ID string `json:"id"`
			} `json:"body"`
		} `json:"batch"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		refuse(rw, "langfuse: %v", err)
		return
	}
	var ok []map[string]any
	w.mu.Lock()
	for _, e := range req.Batch {
		if e.Type == "generation-create" {
			w.logged[e.Body.ID]++
		}
		ok = append(ok, map[string]any{"id": e.ID, "status": 201})
	}
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusMultiStatus)
	json.NewEncoder(rw).Encode(map[string]any{"successes": ok, "errors": []any{}})
}

// loggedEvents returns how many times the gateway-wide Langfuse callback
// received each event id.
func (w *world) loggedEvents() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.logged)
}

// anthropicStream answers a streamed Message in Anthropic's SSE format.
// When a hold is armed it waits after the first event until released.
func (w *world) anthropicStream(rw http.ResponseWriter) {
	rw.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		fmt.Fprintf(rw, "event: %s\ndata: %s\n\n", event, mustJSON(data))
		rw.(http.Flusher).Flush()
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_01XFDUDYJgAACzvnptvVoYEL",
		"type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022", "content": []any{},
		"usage": map[string]int{"input_tokens": 14, "output_tokens": 1}}})
	if hold := w.takeHold(); hold != nil {
		<-hold
	}
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": "Water finds its way"}})
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]int{"output_tokens": 12}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// openAIText answers OpenAI's chat completions (streamed or not),
// completions and responses, in OpenAI's wire format.
func (w *world) openAIText(rw http.ResponseWriter, path string, in map[string]any) {
	usage := map[string]any{"prompt_tokens": 13, "completion_tokens": 9, "total_tokens": 22}
	switch {
	case path == "/v1/completions":
		writeJSON(rw, map[string]any{"id": "cmpl-9Xq2", "object": "text_completion", "created": 1732270000, "model": "gpt-3.5-turbo-instruct",
			"choices": []any{map[string]any{"index": 0, "text": "This is a test.", "finish_reason": "stop", "logprobs": nil}}, "usage": usage})
	case path == "/v1/responses":
		writeJSON(rw, map[string]any{"id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1732270000, "status": "completed", "model": "gpt-4o-mini",
			"output": []any{map[string]any{"type": "message", "id": "msg_67ccd2bf17f0", "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": "Rivers run to the sea, / stones worn round by patient time, / the water moves on.", "annotations": []any{}}}}},
			"usage": map[string]any{"input_tokens": 14, "output_tokens": 20, "total_tokens": 34}})
	case in["stream"] == true:
		opts, _ := in["stream_options"].(map[string]any)
		if opts["include_usage"] != true {
			refuse(rw, "chat stream: stream_options.include_usage is not true: the gateway always asks for usage")
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		head := `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1732270000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[`
		for _, c := range []string{
			`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`,
			`{"index":0,"delta":{"content":"Sunlight scatters off air molecules, "},"logprobs":null,"finish_reason":null}]`,
			`{"index":0,"delta":{"content":"and blue light scatters the most."},"logprobs":null,"finish_reason":null}]`,
			`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`,
			`],"usage":{"prompt_tokens":13,"completion_tokens":9,"total_tokens":22}`,
		} {
			fmt.Fprintf(rw, "data: %s%s}\n\n", head, c)
			rw.(http.Flusher).Flush()
			if hold := w.takeHold(); hold != nil {
				<-hold
			}
		}
		io.WriteString(rw, "data: [DONE]\n\n")
	default:
		writeJSON(rw, map[string]any{"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion", "created": 1732270000, "model": "gpt-4o-mini-2024-07-18",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "The Danube.", "refusal": nil}, "finish_reason": "stop", "logprobs": nil}},
			"usage":   usage})
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(mustJSON(v))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
