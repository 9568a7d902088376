package vertex

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic/anthropictest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// fakeClaude is Claude on Vertex AI: Anthropic's answers on the publisher
// paths, for a token of the local token endpoint only.
func fakeClaude(t *testing.T) (*providertest.Upstream, *googletest.TokenServer) {
	ts := googletest.NewTokenServer(t)
	up := providertest.NewUpstream(t, anthropictest.Handler("", func(authorization string) bool {
		token, ok := strings.CutPrefix(authorization, "Bearer ")
		return ok && ts.Valid(token)
	}))
	return up, ts
}

func openClaude(t *testing.T, up *providertest.Upstream, ts *googletest.TokenServer, model string) models.Chatter {
	t.Helper()
	p := config.Params{Model: "vertex_ai/" + model, APIBase: up.URL, VertexProject: "acme-prod", VertexLocation: "us-east5",
		VertexCredentials: ts.ServiceAccountJSON("sa-project")}
	ep, err := New(providers.NewHTTPClient()).Open(context.Background(), config.Deployment{ModelName: "claude", Params: p}, models.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	return ep.(models.Chatter)
}

func parseChat(t *testing.T, body string) *oai.ChatRequest {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestClaudeRawPredict(t *testing.T) {
	up, ts := fakeClaude(t)
	ep := openClaude(t, up, ts, "claude-sonnet-4-5@20250929")
	ans, err := ep.Chat(context.Background(), parseChat(t, `{"model":"claude","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":64}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	if !strings.Contains(string(b), `"content":"Hello! How can I help?"`) || !strings.Contains(string(b), `"prompt_tokens":19`) {
		t.Errorf("answer %s", b)
	}
	got := up.Last(t)
	providertest.AssertRequest(t, got, providertest.Want{
		Method: "POST", Path: "/v1/projects/acme-prod/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
		Header: map[string]string{"Content-Type": "application/json", "X-Api-Key": "", "Anthropic-Version": ""},
		Body: `{"max_tokens":64,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}],
			"anthropic_version":"vertex-2023-10-16"}`,
	})
	if token, _ := strings.CutPrefix(got.Header.Get("Authorization"), "Bearer "); !ts.Valid(token) {
		t.Errorf("Authorization %q", got.Header.Get("Authorization"))
	}
}

func TestClaudeStreamRawPredict(t *testing.T) {
	up, ts := fakeClaude(t)
	ep := openClaude(t, up, ts, "claude-tools")
	ans, err := ep.Chat(context.Background(), parseChat(t, `{"model":"claude","messages":[{"role":"user","content":"Weather?"}],"stream":true,
		"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reads, err := providertest.Reads(ans.Body)
	if err != nil {
		t.Fatal(err)
	}
	data := providertest.Data(t, []byte(strings.Join(reads, "")))
	head := `{"id":"*","object":"chat.completion.chunk","created":"*","model":"claude-tools","choices":[`
	chunk := func(delta string) string {
		return head + `{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":null}]}`
	}
	want := []string{
		chunk(`{"role":"assistant","content":""}`),
		chunk(`{"content":"I'll check."}`),
		chunk(`{"tool_calls":[{"index":0,"id":"toolu_01A","type":"function","function":{"name":"get_weather","arguments":""}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`),
		chunk(`{"tool_calls":[{"index":1,"id":"toolu_01B","type":"function","function":{"name":"get_time","arguments":""}}]}`),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`),
		head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		head + `],"usage":{"prompt_tokens":19,"completion_tokens":9,"total_tokens":28,"prompt_tokens_details":{"cached_tokens":5},"completion_tokens_details":{"reasoning_tokens":0},"cache_creation_input_tokens":2,"cache_read_input_tokens":5}}`,
		"[DONE]",
	}
	if d := providertest.DiffChunks(want, data); d != "" {
		t.Error(d)
	}
	providertest.AssertRequest(t, up.Last(t), providertest.Want{
		Path:   "/v1/projects/acme-prod/locations/us-east5/publishers/anthropic/models/claude-tools:streamRawPredict",
		Header: map[string]string{"Accept": "text/event-stream"},
		Body: `{"max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"Weather?"}]}],"stream":true,
			"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{}}},{"name":"get_time","input_schema":{"type":"object","properties":{}}}],
			"anthropic_version":"vertex-2023-10-16"}`,
	})
}

func TestClaudeErrors(t *testing.T) {
	up, ts := fakeClaude(t)
	ctx := context.Background()

	_, err := openClaude(t, up, ts, anthropictest.ModelOverloaded).Chat(ctx, parseChat(t, `{"model":"claude","messages":[{"role":"user","content":"x"}]}`))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || pe.Status != 529 || pe.Provider != Name || pe.Message != "Overloaded" {
		t.Errorf("529: %#v", err)
	}

	n := up.Count()
	_, err = openClaude(t, up, ts, "claude-sonnet-4-5").Chat(ctx, parseChat(t, `{"model":"claude","messages":[{"role":"user","content":"x"}],"seed":3}`))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Param != "seed" || !strings.Contains(ae.Message, "vertex_ai") || up.Count() != n {
		t.Errorf("seed: %v", err)
	}

	ts.SetUnavailable(true)
	_, err = openClaude(t, up, ts, "claude-sonnet-4-5").Chat(ctx, parseChat(t, `{"model":"claude","messages":[{"role":"user","content":"x"}]}`))
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || !strings.Contains(ae.Message, "access token") || up.Count() != n {
		t.Errorf("no token: %v", err)
	}
}

func TestIsClaude(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-sonnet-4-5@20250929":                  true,
		"publishers/anthropic/models/claude-opus-4-1": true,
		"Claude-3-Haiku":                              true,
		"gemini-2.5-flash":                            false,
		"text-embedding-005":                          false,
	} {
		if isClaude(model) != want {
			t.Errorf("%s: %v", model, !want)
		}
	}
}
