package spend_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// openAIUpstream answers OpenAI's completions, Responses and moderations
// APIs with 100 input and 50 output tokens (moderations: no usage, as
// OpenAI's), streamed or not; and chat completions streams whose message
// is "hang" with one delta, then nothing until the client leaves.
func openAIUpstream(t *testing.T) *httptest.Server {
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		send := func(events ...string) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events {
				fmt.Fprint(w, ev+"\n\n")
				w.(http.Flusher).Flush()
			}
		}
		switch {
		case r.URL.Path == "/v1/completions" && req.Stream:
			send(`data: {"id":"cmpl-s","object":"text_completion","created":1,"model":"gpt-x","choices":[{"text":"hi","index":0,"logprobs":null,"finish_reason":null}]}`,
				`data: {"id":"cmpl-s","object":"text_completion","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`,
				`data: [DONE]`)
		case r.URL.Path == "/v1/completions":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":"gpt-x","choices":[{"text":"hi","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`)
		case r.URL.Path == "/v1/responses" && req.Stream:
			send(`event: response.created`+"\n"+`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","created_at":1,"status":"in_progress","model":"gpt-x","output":[],"usage":null}}`,
				`event: response.output_text.delta`+"\n"+`data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi"}`,
				`event: response.completed`+"\n"+`data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_s","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[],"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":150}}}`)
		case r.URL.Path == "/v1/responses":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],`+
				`"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":150}}`)
		case r.URL.Path == "/v1/moderations":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{"violence":false},"category_scores":{"violence":0.0001}}]}`)
		case r.URL.Path == "/v1/chat/completions" && req.Stream:
			send(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there, this is the start of a long answer"},"finish_reason":null}]}`)
			select {
			case <-r.Context().Done():
			case <-done:
			}
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":{"message":"no such path","type":"invalid_request_error","param":null,"code":null}}`)
		}
	}))
	t.Cleanup(func() { close(done); s.Close() })
	return s
}

// Completions and Responses calls, streamed or not, cost their usage at
// the model's price: the answer's header says it when the answer is not a
// stream, and the counters have it either way; a moderation, whose
// answer has no usage, costs 0, says so in its header and is counted as a
// request; a chat stream
// the client cuts before its usage came costs what was relayed — more
// than nothing, less than a whole answer.
func TestCompletionsResponsesModerationsAndCutChatStreamsArePriced(t *testing.T) {
	up := openAIUpstream(t)
	opts := gatewaytest.Options{
		Config: `
model_list:
  - model_name: chat
    litellm_params: {model: openai/gpt-x, api_base: "` + up.URL + `/v1", api_key: k, input_cost_per_token: 1e-6, output_cost_per_token: 2e-6}
  - model_name: mod
    litellm_params: {model: openai/omni-moderation-latest, api_base: "` + up.URL + `/v1", api_key: k}
`,
		Jobs: []string{"callback-delivery"},
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		calls := []struct {
			path   string
			body   map[string]any
			header bool // the answer carries its cost
		}{
			{"/v1/completions", map[string]any{"model": "chat", "prompt": "hi"}, true},
			{"/v1/completions", map[string]any{"model": "chat", "prompt": "hi", "stream": true, "stream_options": map[string]any{"include_usage": true}}, false},
			{"/v1/responses", map[string]any{"model": "chat", "input": "hi"}, true},
			{"/v1/responses", map[string]any{"model": "chat", "input": "hi", "stream": true}, false},
		}
		for _, c := range calls {
			r := g.Do("POST", c.path, key, c.body)
			what := fmt.Sprintf("%s stream=%v", c.path, c.body["stream"])
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", what, r.Status, r.Body)
			}
			got := r.Header.Values("x-litellm-response-cost")
			switch {
			case c.header && (len(got) != 1 || !near(parse(t, got[0]), callCost)):
				t.Errorf("%s: x-litellm-response-cost %q, want %v", what, got, callCost)
			case !c.header && len(got) != 0:
				t.Errorf("%s: a stream's headers carry a cost %q before its usage is known", what, got)
			}
		}
		rep := waitReport(t, g, key, "api_key", 4)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, 4*callCost) {
			t.Errorf("4 completions and responses calls cost %v, want %v", got, 4*callCost)
		}

		r := g.Do("POST", "/v1/moderations", key, map[string]any{"model": "mod", "input": "hi"})
		if r.Status != 200 {
			t.Fatalf("moderations: %d %s", r.Status, r.Body)
		}
		if got := r.Header.Values("x-litellm-response-cost"); len(got) != 1 || parse(t, got[0]) != 0 {
			t.Errorf("moderations: x-litellm-response-cost %q, want 0", got)
		}
		rep = waitReport(t, g, key, "api_key", 5)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, 4*callCost) {
			t.Errorf("after a moderation the spend is %v, want %v", got, 4*callCost)
		}

		ctx, cancel := context.WithCancel(context.Background())
		body := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hang"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "long answer") {
		}
		cancel()
		resp.Body.Close()
		rep = waitReport(t, g, key, "api_key", 6)
		cut := rep["total"].(map[string]any)["spend"].(float64) - 4*callCost
		t.Logf("the cut stream cost %v", cut)
		if cut <= 0 || cut >= callCost {
			t.Errorf("the cut stream cost %v; want what was relayed, more than 0 and under a whole answer's %v", cut, callCost)
		}
	})
}

func parse(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Errorf("x-litellm-response-cost %q is not a number", s)
	}
	return v
}
