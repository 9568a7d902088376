package batches_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestMessagesLines: a batch of /v1/messages lines runs on the engine like
// chat lines — a line to the OpenAI-compatible stand-in translated, one to
// the Anthropic stand-in forwarded — each answer a message in Anthropic's
// shape.
func TestMessagesLines(t *testing.T) {
	runEach(t, func(u *upstream) gatewaytest.Options { return options(u) }, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		var lines []line
		for i, model := range []string{"gpt", "claude", "gpt", "claude"} {
			lines = append(lines, line{CustomID: "m-" + strconv.Itoa(i), Method: "POST", URL: "/v1/messages",
				Body: map[string]any{"model": model, "max_tokens": 50, "messages": []any{map[string]any{"role": "user", "content": "hello " + strconv.Itoa(i)}}}})
		}
		file := uploadInput(t, g, key, jsonl(lines))
		resp := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": file, "endpoint": "/v1/messages", "completion_window": "24h"})
		if resp.Status != 200 {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		b := waitFor(t, g, key, decodeBatch(t, resp.Body).ID, batches.StatusCompleted)
		o := collect(t, g, key, b, lines)
		for i, l := range lines {
			r, ok := o.out[l.CustomID]
			if !ok || r.Response == nil || r.Response.StatusCode != 200 {
				t.Fatalf("%s: %+v", l.CustomID, r)
			}
			var m struct {
				Type    string `json:"type"`
				Content []struct {
					Type, Text string
				} `json:"content"`
				Usage struct {
					InputTokens  int64 `json:"input_tokens"`
					OutputTokens int64 `json:"output_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(r.Response.Body, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type != "message" || len(m.Content) != 1 || m.Content[0].Text != "echo: hello "+strconv.Itoa(i) || m.Usage.OutputTokens == 0 {
				t.Errorf("%s: %s", l.CustomID, r.Response.Body)
			}
		}
	})
}
