package spend_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// anthropicUpstream answers Anthropic's Messages API: 100 input and 50
// output tokens, streamed or not; a "hang" message streams its start and
// one delta, then waits for the test to end (the client cuts it).
func anthropicUpstream(t *testing.T) *httptest.Server {
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"%s","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":50}}`, req.Model)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		events := []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"` + req.Model + `","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		}
		hang := len(req.Messages) > 0 && req.Messages[0].Content == "hang"
		if !hang {
			events = append(events,
				`event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":50}}`,
				`event: message_stop`+"\n"+`data: {"type":"message_stop"}`)
		}
		for _, ev := range events {
			fmt.Fprint(w, ev+"\n\n")
			w.(http.Flusher).Flush()
		}
		if hang {
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}
	}))
	t.Cleanup(func() { close(done); s.Close() })
	return s
}

// haiku is what 100 input and 50 output tokens of Claude 3.5 Haiku cost
// in the shipped table.
const haiku = 100*8e-7 + 50*4e-6

func TestPassthroughCallsArePricedStreamedOrNotAndCutStreamsAtWhatCame(t *testing.T) {
	up := anthropicUpstream(t)
	opts := gatewaytest.Options{
		Config: "passthrough:\n  anthropic: {api_base: " + up.URL + ", api_key: sk-ant-provider}\n",
		Jobs:   []string{"callback-delivery"},
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		msg := func(stream bool, content string) string {
			return fmt.Sprintf(`{"model":"claude-3-5-haiku-20241022","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":%q}]}`, stream, content)
		}
		for _, stream := range []bool{false, true} {
			r := g.Do("POST", "/anthropic/v1/messages", key, msg(stream, "hi"), "anthropic-version", "2023-06-01")
			if r.Status != 200 {
				t.Fatalf("stream %v: %d %s", stream, r.Status, r.Body)
			}
		}
		rep := waitReport(t, g, key, "api_key", 2)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, 2*haiku) {
			t.Errorf("two passthrough calls cost %v, want %v", got, 2*haiku)
		}

		// A stream the client cuts after its first delta: the input and the
		// output that came count, not the whole answer.
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/anthropic/v1/messages", strings.NewReader(msg(true, "hang")))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "Hello") {
		}
		cancel()
		resp.Body.Close()
		rep = waitReport(t, g, key, "api_key", 3)
		total := rep["total"].(map[string]any)
		cut := total["spend"].(float64) - 2*haiku
		if cut < 100*8e-7 || cut >= haiku {
			t.Errorf("the cut stream cost %v; want its input (%v) and the little output that came, below the whole answer's %v", cut, 100*8e-7, haiku)
		}
	})
}
