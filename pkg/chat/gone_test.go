package chat_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// hanging is a provider that, asked to stream, sends the first events of
// its answer (in its own wire format: the text "Hello") and then waits; not
// asked to stream, it waits before answering. Either way it reports on
// arrived that the call came and on gone that the gateway cancelled it.
type hanging struct {
	arrived, gone chan struct{}
}

func newHanging() *hanging {
	return &hanging{arrived: make(chan struct{}, 1), gone: make(chan struct{}, 1)}
}

func (h *hanging) handler(contentType string, first ...[]byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) || strings.Contains(strings.ToLower(r.URL.Path), "stream") {
			w.Header().Set("Content-Type", contentType)
			for _, b := range first {
				w.Write(b)
				w.(http.Flusher).Flush()
			}
		}
		h.arrived <- struct{}{}
		<-r.Context().Done()
		h.gone <- struct{}{}
	}
}

func sseData(events ...string) [][]byte {
	out := make([][]byte, len(events))
	for i, e := range events {
		out[i] = []byte(e + "\n\n")
	}
	return out
}

func converseEvent(t *testing.T, typ, payload string) []byte {
	var hs eventstream.Headers
	hs.Set(":event-type", eventstream.StringValue(typ))
	hs.Set(":content-type", eventstream.StringValue("application/json"))
	hs.Set(":message-type", eventstream.StringValue("event"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestClientGoneCancelsEachProvider: a client that leaves — in the middle
// of a stream, or while it waits for a whole answer — cancels the provider's
// request, whichever the provider; the call's log event says the caller
// left (499, not the provider's failure) and, for a stream, keeps what was
// sent before.
func TestClientGoneCancelsEachProvider(t *testing.T) {
	anthropicFirst := sseData(
		"event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		"event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		"event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
	geminiFirst := sseData(`data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}`)
	providers := []struct {
		name, params, contentType string
		first                     [][]byte
	}{
		{"openai", "model: openai/gpt-4o-mini, api_base: %s/v1, api_key: k", "text/event-stream", sseData(
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`)},
		{"azure", "model: azure/chat-dep, api_base: %s, api_key: k, api_version: 2025-01-01-preview", "text/event-stream", sseData(
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":null}]}`)},
		{"anthropic", "model: anthropic/claude-sonnet-4-5, api_base: %s, api_key: k", "text/event-stream", anthropicFirst},
		{"bedrock", "model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0, api_base: %s, aws_region_name: us-east-1, aws_access_key_id: AKIDEXAMPLE, aws_secret_access_key: secret", "application/vnd.amazon.eventstream", [][]byte{
			converseEvent(t, "messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}`),
			converseEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghijk"}`)}},
		{"gemini", "model: gemini/gemini-2.5-flash, api_base: %s, api_key: k", "text/event-stream", geminiFirst},
		{"vertex gemini", "model: vertex_ai/gemini-2.5-flash, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA", "text/event-stream", geminiFirst},
		{"vertex claude", "model: vertex_ai/claude-sonnet-4-5@20250929, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA", "text/event-stream", anthropicFirst},
	}
	ts := googletest.NewTokenServer(t)
	var cfg strings.Builder
	cfg.WriteString("model_list:\n")
	hangs := map[string]*hanging{}
	for _, p := range providers {
		h := newHanging()
		up := providertest.NewUpstream(t, h.handler(p.contentType, p.first...))
		hangs[p.name] = h
		fmt.Fprintf(&cfg, "  - model_name: %s\n    litellm_params: {"+p.params+", max_retries: 0}\n", strings.ReplaceAll(p.name, " ", "-"), up.URL)
	}
	env := map[string]string{"VERTEX_SA": ts.ServiceAccountJSON("sa-project")}
	chattest.Run(t, chattest.Options{Config: cfg.String(), Env: env}, func(t *testing.T, h *chattest.Harness) {
		for _, p := range providers {
			up := hangs[p.name]
			params := openai.ChatCompletionNewParams{Model: strings.ReplaceAll(p.name, " ", "-"), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
			// cancelled waits until the provider saw its request cancelled,
			// and returns the call's log event.
			cancelled := func(t *testing.T) logevent.Event {
				t.Helper()
				select {
				case <-up.gone:
				case <-time.After(10 * time.Second):
					t.Fatal("the provider's request was not cancelled")
				}
				ev := h.Event(t)
				if ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != "499" {
					t.Errorf("event %+v", ev)
				}
				return ev
			}
			t.Run(p.name+" streamed", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s := h.Client.Chat.Completions.NewStreaming(ctx, params)
				var text string
				for text != "Hello" && s.Next() {
					for _, c := range s.Current().Choices {
						text += c.Delta.Content
					}
				}
				if text != "Hello" {
					t.Fatalf("the first text did not arrive: %q, %v", text, s.Err())
				}
				<-up.arrived
				cancel()
				s.Close()
				ev := cancelled(t)
				if !ev.Stream || ev.CompletionStartTime == 0 || !strings.Contains(string(ev.Response), `"content":"Hello"`) {
					t.Errorf("event: stream %v, first token at %v, response %s", ev.Stream, ev.CompletionStartTime, ev.Response)
				}
			})
			t.Run(p.name+" not streamed", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := h.Client.Chat.Completions.New(ctx, params)
					done <- err
				}()
				<-up.arrived
				cancel()
				if err := <-done; err == nil {
					t.Fatal("the call ended without an error")
				}
				if ev := cancelled(t); ev.Stream || ev.Response != nil {
					t.Errorf("event %+v", ev)
				}
			})
		}
	})
}
