package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// TestChatGoesThroughTheCallLayer: chat completions are routed, limited
// and answered as every model call is — a fallback taken before a stream
// began, a key's tpm limit counting the tokens a stream reported (in the
// usage chunk the client did not ask for), a key's model allow-list, a
// team's rpm limit, x-sluice-overhead-ms on a stream.
func TestChatGoesThroughTheCallLayer(t *testing.T) {
	up := providertest.NewUpstream(t, openAIChat())
	cfg := fmt.Sprintf(`model_list:
  - model_name: gpt
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: flaky
    litellm_params: {model: openai/overloaded, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY, max_retries: 0}
  - model_name: backup
    litellm_params: {model: openai/gpt-4o-2024-08-06, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
router_settings:
  fallbacks: [{flaky: [backup]}]
`+chattest.EventsConfig, up.URL)
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := func(model string) openai.ChatCompletionNewParams {
			return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
		}
		sentModels := func(from int) []string {
			var out []string
			for _, r := range up.Requests()[from:] {
				out = append(out, r.JSON(t).(map[string]any)["model"].(string))
			}
			return out
		}
		t.Run("a stream falls back before it begins", func(t *testing.T) {
			before := len(up.Requests())
			s, err := h.Stream(ctx, params("flaky"))
			if err != nil || s.Completion.Choices[0].Message.Content != "Hello! How can I help?" {
				t.Fatalf("stream %v %+v", err, s.Completion)
			}
			if got := strings.Join(sentModels(before), " "); got != "overloaded gpt-4o-2024-08-06" {
				t.Errorf("the provider got %s", got)
			}
			if ev := h.Event(t); ev.ModelGroup != "backup" || ev.Status != "success" || ev.TotalTokens != 26 {
				t.Errorf("event %+v", ev)
			}
		})
		t.Run("a key's tpm limit counts a stream's tokens", func(t *testing.T) {
			storetest.WithinOneLimitWindow(t, 10*time.Second)
			team := h.Gateway.NewTeam(map[string]any{"team_alias": "tpm"})
			key := h.Gateway.NewKey(team, map[string]any{"tpm_limit": 26})
			c := chattest.Client(h.Gateway, key)
			s := c.Chat.Completions.NewStreaming(ctx, params("gpt"))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			s.Close()
			h.Event(t)
			r := h.Gateway.Do("POST", "/v1/chat/completions", key, `{"model":"gpt","messages":[{"role":"user","content":"Hi"}]}`)
			if r.Status != 429 || r.ErrorCode(t) != "rate_limit_exceeded" {
				t.Errorf("over the tpm limit: %d %s", r.Status, r.Body)
			}
		})
		t.Run("a key's allowed models", func(t *testing.T) {
			team := h.Gateway.NewTeam(map[string]any{"team_alias": "allow"})
			key := h.Gateway.NewKey(team, map[string]any{"models": []string{"gpt", "flaky"}})
			if r := h.Gateway.Do("POST", "/v1/chat/completions", key, `{"model":"backup","stream":true,"messages":[{"role":"user","content":"Hi"}]}`); r.Status != 403 || r.ErrorCode(t) != "permission_denied" {
				t.Errorf("a model the key may not use: %d %s", r.Status, r.Body)
			}
			h.Event(t)
			// Nor through a fallback: flaky's fails, its fallback is not tried.
			before := len(up.Requests())
			if r := h.Gateway.Do("POST", "/v1/chat/completions", key, `{"model":"flaky","messages":[{"role":"user","content":"Hi"}]}`); r.Status != 502 {
				t.Errorf("a fallback the key may not use: %d %s", r.Status, r.Body)
			}
			if got := strings.Join(sentModels(before), " "); got != "overloaded" {
				t.Errorf("the provider got %s", got)
			}
			h.Event(t)
		})
		t.Run("a team's rpm limit", func(t *testing.T) {
			storetest.WithinOneLimitWindow(t, 10*time.Second)
			team := h.Gateway.NewTeam(map[string]any{"team_alias": "rpm", "rpm_limit": 1})
			key := h.Gateway.NewKey(team, nil)
			body := `{"model":"gpt","messages":[{"role":"user","content":"Hi"}]}`
			if r := h.Gateway.Do("POST", "/chat/completions", key, body); r.Status != 200 {
				t.Fatalf("first call: %d %s", r.Status, r.Body)
			}
			h.Event(t)
			r := h.Gateway.Do("POST", "/chat/completions", key, body)
			if r.Status != 429 || r.ErrorCode(t) != "rate_limit_exceeded" {
				t.Errorf("over the rpm limit: %d %s", r.Status, r.Body)
			}
		})
		t.Run("a stream's overhead header", func(t *testing.T) {
			r := h.Post(t, "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
			var ms float64
			if r.Status != 200 || r.Header.Get("Content-Type") != "text/event-stream" || json.Unmarshal([]byte(r.Header.Get("X-Sluice-Overhead-Ms")), &ms) != nil {
				t.Errorf("%d %v", r.Status, r.Header)
			}
			h.Event(t)
		})
	})
}

// TestChatLogEvent: a chat call's log event, whole — who called, the model
// group, deployment, provider and base, the messages and parameters as
// given, the answer, its usage and finish reason, and for a stream the time
// of its first byte.
func TestChatLogEvent(t *testing.T) {
	up := providertest.NewUpstream(t, openAIChat())
	cfg := fmt.Sprintf("model_list:\n  - model_name: gpt\n    litellm_params: {model: openai/gpt-4o-mini, api_base: %s/v1, api_key: %s}\n", up.URL, upstreamKey)
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		messages := `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]`
		for _, stream := range []bool{false, true} {
			r := h.Post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"gpt","messages":%s,"temperature":0.2,"max_tokens":50,"user":"u-7","stream":%v,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, messages, stream))
			if r.Status != 200 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			ev := h.Event(t)
			want := logevent.Event{
				CallType: "acompletion", Stream: stream, Status: "success", CustomLLMProvider: "openai",
				PromptTokens: 19, CompletionTokens: 7, TotalTokens: 26, Model: "gpt-4o-mini", ModelGroup: "gpt",
				ResponseCost: 19*1.5e-7 + 7*6e-7, // gpt-4o-mini in the price table
				APIBase:      up.URL + "/v1", EndUser: "u-7", FinishReason: "stop",
				Messages:        json.RawMessage(messages),
				ModelParameters: json.RawMessage(`{"max_tokens":50,"temperature":0.2,"tool_choice":"none","tools":1,"user":"u-7"}`),
			}
			if stream {
				want.ModelParameters = json.RawMessage(`{"max_tokens":50,"stream":true,"temperature":0.2,"tool_choice":"none","tools":1,"user":"u-7"}`)
			}
			ignore := cmpopts.IgnoreFields(logevent.Event{}, "ID", "TraceID", "StartTime", "EndTime", "CompletionStartTime", "ResponseTime", "ModelID", "Metadata", "RequestTags", "Response")
			if diff := cmp.Diff(want, ev, ignore, cmpopts.EquateApprox(0, 1e-15), cmp.Comparer(func(a, b json.RawMessage) bool { return jsonEqual(a, b) })); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
			if ev.ModelID == "" || ev.Metadata.UserAPIKeyTeamID == "" || ev.Metadata.UserAPIKeyHash == "" || !strings.HasPrefix(ev.Metadata.RequestID, "req_") {
				t.Errorf("deployment %q, metadata %+v", ev.ModelID, ev.Metadata)
			}
			if ev.CompletionStartTime < ev.StartTime || ev.EndTime < ev.CompletionStartTime || ev.CompletionStartTime == 0 {
				t.Errorf("times: start %v, first byte %v, end %v", ev.StartTime, ev.CompletionStartTime, ev.EndTime)
			}
			var resp struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(ev.Response, &resp); err != nil || resp.Object != "chat.completion" || resp.Choices[0].Message.Content != "Hello! How can I help?" {
				t.Errorf("response %s", ev.Response)
			}
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return cmp.Equal(x, y)
}
