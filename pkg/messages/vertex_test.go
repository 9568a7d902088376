package messages_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic/anthropictest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// TestClaudeOnVertexNatively: a Messages call to Claude on Vertex AI goes
// to rawPredict (streamRawPredict) with the Google token, the client's body
// with Vertex's anthropic_version and no model; the answer and its events
// come back as Anthropic's.
func TestClaudeOnVertexNatively(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	up := providertest.NewUpstream(t, anthropictest.Handler("", func(authorization string) bool {
		token, ok := strings.CutPrefix(authorization, "Bearer ")
		return ok && ts.Valid(token)
	}))
	cfg := fmt.Sprintf("model_list:\n  - model_name: claude\n    litellm_params: {model: vertex_ai/claude-sonnet-4-5@20250929, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA}\n", up.URL)
	env := map[string]string{"VERTEX_SA": ts.ServiceAccountJSON("sa-project")}
	chattest.Run(t, chattest.Options{Config: cfg, Env: env}, func(t *testing.T, h *chattest.Harness) {
		res := h.Gateway.Do("POST", "/v1/messages", h.Key, `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"Hello!"}]}`, "Anthropic-Beta", "interleaved-thinking-2025-05-14")
		if res.Status != 200 || !strings.Contains(string(res.Body), anthropictest.Text) || !strings.Contains(string(res.Body), `"type":"message"`) {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Path: "/v1/projects/acme-prod/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			Body: `{"max_tokens":100,"messages":[{"role":"user","content":"Hello!"}],"anthropic_version":"vertex-2023-10-16","stream":false}`,
		})
		if got := up.Last(t).Header.Get("Anthropic-Beta"); got != "interleaved-thinking-2025-05-14" {
			t.Errorf("anthropic-beta %q", got)
		}
		if ev := h.Event(t); ev.TotalTokens != anthropictest.InputTokens+anthropictest.CacheRead+anthropictest.CacheCreation+anthropictest.OutputTokens || ev.FinishReason != "end_turn" {
			t.Errorf("event: tokens %d, finish %q", ev.TotalTokens, ev.FinishReason)
		}
		res = h.Gateway.Do("POST", "/v1/messages", h.Key, `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hello!"}]}`)
		if res.Status != 200 || !strings.Contains(string(res.Body), "event: message_stop") {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		if path := up.Last(t).Path; !strings.HasSuffix(path, ":streamRawPredict") {
			t.Errorf("path %s", path)
		}
	})
}
