package messages_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
	"github.com/sluice-gateway/sluice/pkg/sse"
	"github.com/sluice-gateway/sluice/pkg/sse/ssetest"
)

const longEvents = 10_000

// TestLongTranslatedStreamInFlatMemory: 10,000 text chunks from an
// OpenAI-compatible provider, translated into Anthropic's events, reach an
// HTTP client of the gateway whole, with the usage, while the heap in use
// stays flat (ssetest.ReadFlat), as chat's streams are held (pkg/chat's
// flat-memory test).
func TestLongTranslatedStreamInFlatMemory(t *testing.T) {
	const word = "word "
	chunk := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	up := providertest.NewUpstream(t, ssetest.LongStream(longEvents, "text/event-stream",
		[]byte(chunk(`{"role":"assistant","content":""}`, "null")),
		[]byte(chunk(`{"content":"`+word+`"}`, "null")),
		[]byte(chunk(`{}`, `"stop"`)+`data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":10000,"total_tokens":10003}}`+"\n\ndata: [DONE]\n\n")))
	cfg := fmt.Sprintf("model_list:\n  - model_name: long\n    litellm_params: {model: openai/gpt-4o-mini, api_base: %s/v1, api_key: k}\n", up.URL)
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		body := `{"model":"long","max_tokens":20000,"messages":[{"role":"user","content":"Count."}],"stream":true}`
		req, err := http.NewRequest("POST", h.Gateway.URL+"/v1/messages", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", h.Key)
		resp, err := h.Gateway.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var (
			last  string
			usage bool
		)
		texts := ssetest.ReadFlat(t, resp.Body, longEvents,
			func(ev sse.Event) bool { return bytes.Contains(ev.Data, []byte(`"text":"`+word+`"`)) },
			func(ev sse.Event) {
				last = string(ev.Type)
				usage = usage || bytes.Contains(ev.Data, []byte(`"usage":{"input_tokens":3,"output_tokens":10000`))
			})
		if texts != longEvents || !usage || last != "message_stop" {
			t.Fatalf("%d text events, usage %v, last %q", texts, usage, last)
		}
		if ev := h.Event(t); ev.TotalTokens != 10003 || ev.Status != "success" {
			t.Errorf("event %+v", ev)
		}
	})
}
