package messages_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

const longEvents = 10_000

// liveHeap is the heap in use after a collection (two: the second frees
// what the first left in the pools' victim caches).
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestLongTranslatedStreamInFlatMemory: 10,000 text chunks from an
// OpenAI-compatible provider, translated into Anthropic's events, reach an
// HTTP client of the gateway whole, with the usage, while the heap in use
// stays flat — its least at the 9,000th and 10,000th text events (the
// stream still open) within 512 KiB of its least over the first 4,000, as
// chat's streams are held (pkg/chat's flat-memory test).
func TestLongTranslatedStreamInFlatMemory(t *testing.T) {
	const word = "word "
	chunk := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk(`{"role":"assistant","content":""}`, "null"))
		delta := []byte(chunk(`{"content":"`+word+`"}`, "null"))
		for range longEvents {
			w.Write(delta)
		}
		io.WriteString(w, chunk(`{}`, `"stop"`))
		io.WriteString(w, `data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":10000,"total_tokens":10003}}`+"\n\ndata: [DONE]\n\n")
	})
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
		rd := sse.NewReader(resp.Body, sse.Limits{})
		var (
			texts, events int
			early, late   int64 = math.MaxInt64, math.MaxInt64
			last          string
			usage         bool
		)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %d events: %v", events, err)
			}
			events++
			if bytes.Contains(ev.Data, []byte(`"text":"`+word+`"`)) {
				switch texts++; {
				case texts%1000 != 0:
				case texts <= 4000:
					early = min(early, liveHeap())
				case texts >= longEvents-1000:
					late = min(late, liveHeap())
				}
			}
			last = string(ev.Type)
			usage = usage || bytes.Contains(ev.Data, []byte(`"usage":{"input_tokens":3,"output_tokens":10000`))
		}
		if texts != longEvents || !usage || last != "message_stop" {
			t.Fatalf("%d text events of %d, usage %v, last %q", texts, events, usage, last)
		}
		if grown := late - early; grown > 512<<10 {
			t.Errorf("the heap grew by %d KiB over the stream", grown>>10)
		} else {
			t.Logf("the heap grew by %d KiB over the stream", grown>>10)
		}
		if ev := h.Event(t); ev.TotalTokens != 10003 || ev.Status != "success" {
			t.Errorf("event %+v", ev)
		}
	})
}
