package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// target is one way of reaching the upstream: directly, through the bare
// proxy, or through sluice.
type target struct {
	name   string // "direct", "proxy", "sluice"
	base   string
	proc   *proc // the process whose CPU and memory are charged
	sluice bool
	key    string // the credential the client presents
	pprof  string // host:port of its pprof listener (-profile), or ""
}

// closedConcurrency is the closed loop's requests in flight: enough to
// saturate two cores through either proxy, as the issues measure.
const closedConcurrency = 64

// httpScenario is a request/response scenario measured on every target.
type httpScenario struct {
	name  string
	about string
	// concurrency and rate are the defaults of the closed and open loops.
	concurrency int
	rate        float64
	stream      bool
	// cpuLimit is the target for sluice's CPU per request as a multiple of
	// the bare proxy's; 0 means the issues set none.
	cpuLimit float64
	// reportOnly says the issues set no latency target for this path: its
	// figures are reported and compared, but checked against nothing.
	reportOnly bool
	// closedLatency checks the closed loop's latency (at its fixed
	// concurrency) instead of the open loop's: issue 14 sets its latency
	// targets at concurrency 1 and 64.
	closedLatency bool
	// ttfbSlackMS is the streaming TTFB target, sluice's added TTFB at most
	// the bare proxy's + this; 0 is the default, ttfbSlackMS.
	ttfbSlackMS float64
	// framingEvents, when set, are the events of a streamed answer besides
	// its -stream-chunks content deltas (Anthropic's message_start,
	// content_block_start, ping, content_block_stop, message_delta,
	// message_stop: 6): the report adds the CPU per provider event.
	framingEvents int
	// upstreamRoute is the upstream counter a sluice request must move
	// (proof that sluice called the provider); "" if sluice answers itself.
	upstreamRoute string
	spec          func(t target) requestSpec
	// check validates one answer (the probe's) from target t.
	check func(t target, h http.Header, body []byte) error
}

// Request bodies of realistic size: a short document to embed, a chat with
// a system prompt and a question, an Anthropic Messages call.
const (
	embedInput = "Sluice is a serverless model gateway. It stands in front of hosted AI model providers " +
		"and gives teams one authenticated, logged, OpenAI-compatible front door: files and batches, " +
		"embeddings and moderations, raw passthrough to four providers, and per-team logging callbacks. " +
		"This paragraph is about one hundred and twenty tokens long, a typical chunk of a retrieval corpus " +
		"that a team embeds by the thousand when it indexes its documents for search and question answering."
	systemPrompt = "You are a careful assistant for an engineering team. Answer in plain English, cite the " +
		"section of the document you rely on, and say so when the document does not contain the answer. " +
		"Keep answers under three hundred words unless the user asks for more detail."
)

func chatBody(stream bool) []byte {
	body := map[string]any{
		"model": "gpt-4o-mini",
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": "Summarise this for a new engineer: " + embedInput},
		},
		"max_tokens":  256,
		"temperature": 0.2,
	}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	return mustJSON(body)
}

// claudeChatBody is anthropicBody as an OpenAI chat request: what sluice
// translates into it.
func claudeChatBody(stream bool) []byte {
	body := map[string]any{
		"model": "claude-sonnet-4-5",
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": "Summarise this for a new engineer: " + embedInput},
		},
		"max_tokens": 256,
	}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	return mustJSON(body)
}

func anthropicBody(stream bool) []byte { return anthropicBodyFor("claude-sonnet-4-5", stream) }

// anthropicBodyFor is a Messages request for model.
func anthropicBodyFor(model string, stream bool) []byte {
	body := map[string]any{
		"model":      model,
		"max_tokens": 256,
		"system":     systemPrompt,
		"messages":   []map[string]string{{"role": "user", "content": "Summarise this for a new engineer: " + embedInput}},
	}
	if stream {
		body["stream"] = true
	}
	return mustJSON(body)
}

// mustJSON encodes values built from literals, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The Bedrock Titan deployments of the embeddings-titan and titan-fanout
// scenarios: sluice's model names and the Bedrock model id behind them.
const (
	titanModelID   = "amazon.titan-embed-text-v2:0"
	titanModel     = "titan-embed-v2"
	titanSlowModel = "titan-embed-v2-slow" // on the upstream with -latency titanFanoutLatency
	// titanDims is the vector size the upstream answers a Titan call that
	// names no dimensions with (its -dims default).
	titanDims = 1536
)

// titanInvokePath is the InvokeModel path as sluice sends it (the model id
// path-escaped, ':' as %3A), for the direct and bare-proxy targets.
const titanInvokePath = "/model/amazon.titan-embed-text-v2%3A0/invoke"

// titanInvokeBody is the InvokeModel body sluice sends for one text.
func titanInvokeBody(text string) []byte {
	return mustJSON(map[string]any{"inputText": text, "embeddingTypes": []string{"float"}})
}

// titanEmbeddingsBody is the OpenAI request sluice translates to Titan calls.
func titanEmbeddingsBody(model string, input any) []byte {
	return mustJSON(map[string]any{"model": model, "input": input, "encoding_format": "base64"})
}

// titanCheck checks a Titan answer (direct, proxy) or sluice's translation
// of it: an OpenAI list whose vectors are base64 of n float32s each.
func titanCheck(n, dims int) func(target, http.Header, []byte) error {
	raw := jsonHas("embedding")
	return func(t target, h http.Header, body []byte) error {
		if !t.sluice {
			return raw(t, h, body)
		}
		var ans struct {
			Data []struct {
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ans); err != nil {
			return fmt.Errorf("answer is not an embeddings list: %s", clip(body))
		}
		if len(ans.Data) != n {
			return fmt.Errorf("answer has %d vectors, want %d: %s", len(ans.Data), n, clip(body))
		}
		for i, d := range ans.Data {
			var s string
			if err := json.Unmarshal(d.Embedding, &s); err != nil {
				return fmt.Errorf("vector %d is not a base64 string: %s", i, clip(d.Embedding))
			}
			v, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return fmt.Errorf("vector %d: %w", i, err)
			}
			if len(v) != 4*dims {
				return fmt.Errorf("vector %d has %d bytes, want %d float32s", i, len(v), dims)
			}
		}
		return nil
	}
}

func bearer(t target) http.Header { return http.Header{"Authorization": {"Bearer " + t.key}} }

func post(t target, path string, h http.Header, body []byte) requestSpec {
	return requestSpec{Method: http.MethodPost, URL: t.base + path, Header: h, Body: body}
}

// httpScenarios returns the request/response scenarios in run order.
func httpScenarios() []httpScenario {
	embeddings := mustJSON(map[string]any{"model": "text-embedding-3-small", "input": embedInput})
	titanEmbeddings, titanInvoke := titanEmbeddingsBody(titanModel, embedInput), titanInvokeBody(embedInput)
	chat, chatStream := chatBody(false), chatBody(true)
	return append([]httpScenario{
		{
			name: "noop", about: "authenticated no-op: GET /v1/models",
			concurrency: closedConcurrency, rate: 1000,
			spec: func(t target) requestSpec {
				return requestSpec{Method: http.MethodGet, URL: t.base + "/v1/models", Header: bearer(t)}
			},
			check: jsonHas("data"),
		},
		{
			name: "embeddings", about: "POST /v1/embeddings, one input, 1536-dim float answer (~30 KB)",
			concurrency: closedConcurrency, rate: 1000, cpuLimit: 1.2, upstreamRoute: "openai.embeddings",
			spec:  func(t target) requestSpec { return post(t, "/v1/embeddings", bearer(t), embeddings) },
			check: jsonHas("data"),
		},
		{
			name: "embeddings-titan", about: "POST /v1/embeddings, one input, base64, to Bedrock Titan v2 (direct and proxy: the Titan InvokeModel call)",
			concurrency: closedConcurrency, rate: 400, cpuLimit: 2.5, upstreamRoute: "bedrock.invoke", reportOnly: true,
			spec: func(t target) requestSpec {
				if t.sluice {
					return post(t, "/v1/embeddings", bearer(t), titanEmbeddings)
				}
				return post(t, titanInvokePath, nil, titanInvoke)
			},
			check: titanCheck(1, titanDims),
		},
		{
			name: "chat", about: "POST /v1/chat/completions, non-streaming, 200-token answer",
			concurrency: 32, rate: 800, cpuLimit: 1.2, upstreamRoute: "openai.chat",
			spec:  func(t target) requestSpec { return post(t, "/v1/chat/completions", bearer(t), chat) },
			check: jsonHas("choices"),
		},
		{
			name: "chat-c1", about: "chat, latency one request at a time (closed loop, concurrency 1)",
			concurrency: 1, rate: 100, closedLatency: true, upstreamRoute: "openai.chat",
			spec:  func(t target) requestSpec { return post(t, "/v1/chat/completions", bearer(t), chat) },
			check: jsonHas("choices"),
		},
		{
			name: "chat-c64", about: "chat, latency 64 requests at a time (closed loop, concurrency 64)",
			concurrency: 64, rate: 100, closedLatency: true, upstreamRoute: "openai.chat",
			spec:  func(t target) requestSpec { return post(t, "/v1/chat/completions", bearer(t), chat) },
			check: jsonHas("choices"),
		},
		{
			name: "chat-stream", about: "POST /v1/chat/completions, SSE, 200 chunks + usage chunk",
			concurrency: 32, rate: 100, stream: true, ttfbSlackMS: 0.3, upstreamRoute: "openai.chat",
			spec:  func(t target) requestSpec { return post(t, "/v1/chat/completions", bearer(t), chatStream) },
			check: streamHas("text/event-stream", "data: [DONE]"),
		},
	}, anthropicScenarios()...)
}

// anthropicScenarios returns the scenarios that speak Anthropic's Messages
// API on one side or both, in run order.
func anthropicScenarios() []httpScenario {
	chat := chatBody(false)
	msgs, msgsStream := anthropicBody(false), anthropicBody(true)
	claude, claudeStream := claudeChatBody(false), claudeChatBody(true)
	// The Messages call sluice translates for the OpenAI-compatible deployment.
	gptMsgs := anthropicBodyFor("gpt-4o-mini", false)
	anthropicHeaders := func(t target) http.Header {
		return http.Header{"X-Api-Key": {t.key}, "Anthropic-Version": {"2023-06-01"}}
	}
	anthropicPath := func(t target) string {
		if t.sluice {
			return "/anthropic/v1/messages"
		}
		return "/v1/messages"
	}
	return []httpScenario{
		{
			name: "chat-anthropic", about: "POST /v1/chat/completions translated to Anthropic Messages, non-streaming (direct and proxy: the /v1/messages call)",
			// Issue 14 sets this path a CPU target only: its latency is reported.
			concurrency: 32, rate: 800, cpuLimit: 2, reportOnly: true, upstreamRoute: "anthropic.messages",
			spec: func(t target) requestSpec {
				if t.sluice {
					return post(t, "/v1/chat/completions", bearer(t), claude)
				}
				return post(t, "/v1/messages", anthropicHeaders(t), msgs)
			},
			check: func(t target, h http.Header, body []byte) error {
				if t.sluice {
					return jsonHas("choices")(t, h, body)
				}
				return jsonHas("content")(t, h, body)
			},
		},
		{
			name: "chat-anthropic-stream", about: "POST /v1/chat/completions translated from Anthropic's SSE, 200 deltas (direct and proxy: the /v1/messages stream)",
			concurrency: 32, rate: 100, stream: true, ttfbSlackMS: 0.3, framingEvents: 6, upstreamRoute: "anthropic.messages",
			spec: func(t target) requestSpec {
				if t.sluice {
					return post(t, "/v1/chat/completions", bearer(t), claudeStream)
				}
				return post(t, "/v1/messages", anthropicHeaders(t), msgsStream)
			},
			check: func(t target, h http.Header, body []byte) error {
				if t.sluice {
					return streamHas("text/event-stream", "data: [DONE]")(t, h, body)
				}
				return streamHas("text/event-stream", "event: message_stop")(t, h, body)
			},
		},
		{
			name: "messages-openai", about: "POST /v1/messages translated to an OpenAI-compatible chat call, non-streaming (direct and proxy: the /v1/chat/completions call)",
			// Issue 30's target: at most twice the bare proxy's CPU.
			concurrency: 32, rate: 800, cpuLimit: 2, reportOnly: true, upstreamRoute: "openai.chat",
			spec: func(t target) requestSpec {
				if t.sluice {
					return post(t, "/v1/messages", anthropicHeaders(t), gptMsgs)
				}
				return post(t, "/v1/chat/completions", bearer(t), chat)
			},
			check: func(t target, h http.Header, body []byte) error {
				if t.sluice {
					return jsonHas("content")(t, h, body)
				}
				return jsonHas("choices")(t, h, body)
			},
		},
		{
			name: "messages-anthropic", about: "POST /v1/messages served natively by an Anthropic deployment, non-streaming (direct and proxy: /v1/messages)",
			// Issue 30's target: at most 1.2 times the bare proxy's CPU.
			concurrency: closedConcurrency, rate: 800, cpuLimit: 1.2, reportOnly: true, upstreamRoute: "anthropic.messages",
			spec:  func(t target) requestSpec { return post(t, "/v1/messages", anthropicHeaders(t), msgs) },
			check: jsonHas("content"),
		},
		{
			name: "passthrough", about: "POST /anthropic/v1/messages (direct and proxy: /v1/messages), non-streaming",
			concurrency: closedConcurrency, rate: 800, cpuLimit: 1.2, upstreamRoute: "anthropic.messages",
			spec:  func(t target) requestSpec { return post(t, anthropicPath(t), anthropicHeaders(t), msgs) },
			check: jsonHas("content"),
		},
		{
			name: "passthrough-stream", about: "POST /anthropic/v1/messages, SSE, 200 deltas",
			concurrency: closedConcurrency, rate: 100, stream: true, upstreamRoute: "anthropic.messages",
			spec:  func(t target) requestSpec { return post(t, anthropicPath(t), anthropicHeaders(t), msgsStream) },
			check: streamHas("text/event-stream", "event: message_stop"),
		},
	}
}

// jsonHas checks that an answer is a JSON object with the given field.
func jsonHas(field string) func(target, http.Header, []byte) error {
	return func(_ target, _ http.Header, body []byte) error {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return fmt.Errorf("answer is not a JSON object: %s", clip(body))
		}
		if _, ok := m[field]; !ok {
			return fmt.Errorf("answer has no %q: %s", field, clip(body))
		}
		return nil
	}
}

// streamHas checks a streamed answer's media type and that it ran to its end.
func streamHas(contentType, last string) func(target, http.Header, []byte) error {
	return func(_ target, h http.Header, body []byte) error {
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, contentType) {
			return fmt.Errorf("Content-Type %q, want %s", ct, contentType)
		}
		if !bytes.Contains(body, []byte(last)) {
			return fmt.Errorf("stream ended without %q", last)
		}
		return nil
	}
}
